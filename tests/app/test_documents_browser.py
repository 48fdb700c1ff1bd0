"""The Documents view in a real browser against the whole app with logins: a user uploads files
(one unreadable), sees them listed with their passages, and another user does not see them."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from tests.app.conftest import login

pytestmark = pytest.mark.browser


def test_a_user_uploads_documents_that_only_they_see(start_app, new_page, tmp_path, embedder):
    from backend.documents import DocumentStore

    url, ctx = start_app(with_logins=True)
    ctx.runtime.documents = DocumentStore(tmp_path / "documents", embedder=embedder)
    (tmp_path / "reactors.md").write_text("# Reactors\n\nThe Quillmoor reactor opened in 1987.\n", encoding="utf-8")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 and nothing more")

    page = new_page()
    login(page, url, "alice", "alice-pass")
    page.get_by_role("tab", name="Documents").click()
    expect(page.locator("#documents-status")).to_contain_text("0 files, 0 passages")
    page.locator("#documents-files input[type=file]").set_input_files(
        [str(tmp_path / "reactors.md"), str(tmp_path / "broken.pdf")])
    expect(page.locator("#documents-files")).to_contain_text(re.compile(r"reactors.*broken", re.S))  # both uploaded
    page.locator("#documents-collection input, #documents-collection textarea").first.fill("papers")
    page.locator("#documents-add-button").click()
    result = page.locator("#documents-result")
    expect(result).to_contain_text("Added 1 files to papers", timeout=60_000)
    expect(result).to_contain_text("FAILED broken.pdf")
    expect(page.locator("#documents-table")).to_contain_text("reactors.md")
    expect(page.locator("#documents-status")).to_contain_text("1 files, 1 passages")

    other = new_page()
    login(other, url, "bob", "bob-pass")
    other.get_by_role("tab", name="Documents").click()
    expect(other.locator("#documents-status")).to_contain_text("0 files, 0 passages")
    expect(other.locator("#documents-table")).not_to_contain_text("reactors.md")
