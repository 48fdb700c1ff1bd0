"""The Documents view's functions (what its buttons call) on a real runtime and document store: add
with progress (an unreadable file named, the rest in), list, remove, re-index, open a source, the OCR
line, who may see and change what with logins, and a listing that a file kept under two names, a
damaged manifest row or a manifest that is not JSON does not break."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from PIL import Image, ImageDraw, ImageFont

from app.auth import User, UserDirectory
from app.documents_tab import (
    COLUMNS, WHOLE_COLLECTION, add_documents, file_choices, load_documents, open_source, reindex_documents,
    remove_documents,
)
from app.session import AppContext
from app.user_files import UserFiles
from backend.documents import DocumentStore, ocr

FACT = "The Quillmoor reactor was commissioned in 1987 by the engineer Ada Vantrell."


def as_user(name):
    return SimpleNamespace(username=name)


def users() -> UserDirectory:
    return UserDirectory({"alice": User("alice", "scrypt$x"), "bob": User("bob", "scrypt$x"),
                          "root": User("root", "scrypt$x", admin=True)})


@pytest.fixture
def files(tmp_path):
    folder = tmp_path / "uploads"
    folder.mkdir()
    (folder / "reactors.md").write_text(f"# Reactors\n\n{FACT}\n", encoding="utf-8")
    (folder / "handbook.txt").write_text("Visitors must sign the register at the front desk.\n", encoding="utf-8")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 but nothing else")
    image = Image.new("L", (1400, 500), 255)
    ImageDraw.Draw(image).text((60, 180), "PELICAN CODE 7319", fill=0, font=ImageFont.load_default(size=90))
    image.save(folder / "scan.pdf", "PDF", resolution=150)
    return folder


@pytest.fixture
def with_documents(runtime, tmp_path, embedder):
    runtime.documents = DocumentStore(tmp_path / "documents", embedder=embedder)
    return runtime


def view(ctx, who=None):
    status, rows, chosen, chosen_file, shared = load_documents(ctx, as_user(who) if who else None)
    return SimpleNamespace(status=status, rows=rows, choices=chosen["choices"], chosen=chosen["value"],
                           files=chosen_file["choices"], shared_visible=shared["visible"])


def test_add_list_remove_and_reindex_in_local_mode(with_documents, files):
    ctx = AppContext(with_documents)
    empty = view(ctx)
    assert "**0 files, 0 passages**" in empty.status and empty.rows == [] and empty.choices == []
    assert ("OCR is on" in empty.status) == ocr.ocr_available()
    assert "Reading one file may take at most 300 s and 1,024 MB of memory, 2,000 PDF pages," in empty.status
    steps = []
    report = add_documents(ctx, None, [str(files / "reactors.md"), str(files / "broken.pdf")], "papers",
                           progress=lambda fraction, text: steps.append((fraction, text)))
    assert report.startswith("Added 1 files to **papers**; **1 could not be added**.")
    assert "- FAILED broken.pdf: " in report and "- reactors.md: 1 passage" in report
    assert steps[-1] == (1.0, "done") and all(a[0] <= b[0] for a, b in zip(steps, steps[1:]))
    shown = view(ctx)
    assert len(COLUMNS) == len(shown.rows[0])
    assert shown.rows[0][:4] == ["papers", "reactors.md", "markdown", 1]
    assert shown.choices == ["papers"] and shown.files == [WHOLE_COLLECTION, "reactors.md"]
    assert shown.shared_visible, "the single local user may add shared collections"
    found = ctx.runtime.documents.search("default", ["Quillmoor reactor"], 3)[0]
    assert found[0][0].url == "doc://papers/reactors.md#section=Reactors"

    assert "Re-indexed 1 files" in reindex_documents(ctx, None, "papers", "reactors.md")
    assert add_documents(ctx, None, [str(files / "reactors.md")], "papers").startswith(
        "Added 0 files to **papers**, 1 unchanged.")
    assert "Removed **reactors.md** from **papers**" in remove_documents(ctx, None, "papers", "reactors.md")
    assert view(ctx).rows == [] and ctx.runtime.documents.search("default", ["Quillmoor reactor"], 3) == [[]]


def test_with_logins_each_user_sees_and_changes_only_their_own(runtime, with_documents, files, tmp_path):
    ctx = AppContext(with_documents, users=users(), files=UserFiles(tmp_path / "served"))
    assert "Added 1 files" in add_documents(ctx, as_user("alice"), [str(files / "reactors.md")], "private")
    refused = add_documents(ctx, as_user("bob"), [str(files / "handbook.txt")], "handbook", shared=True)
    assert refused == "⚠️ Only an admin can add to a shared collection."
    assert "Added 1 files to **shared/handbook**" in add_documents(
        ctx, as_user("root"), [str(files / "handbook.txt")], "handbook", shared=True)

    alice, bob, root = view(ctx, "alice"), view(ctx, "bob"), view(ctx, "root")
    assert [row[:2] for row in alice.rows] == [["private", "reactors.md"], ["shared/handbook", "handbook.txt"]]
    assert [row[:2] for row in bob.rows] == [["shared/handbook", "handbook.txt"]]
    assert "reactors.md" not in str(bob.rows) and "Quillmoor" not in bob.status
    assert alice.choices == ["private"] and bob.choices == [] and not bob.shared_visible
    assert root.choices == ["shared/handbook"] and root.shared_visible  # the admin sees no one else's own files
    assert file_choices(ctx, as_user("bob"), "private") == [WHOLE_COLLECTION]

    assert remove_documents(ctx, as_user("bob"), "shared/handbook", None) == "⚠️ Only an admin can change a shared collection."
    assert remove_documents(ctx, as_user("bob"), "private", None).startswith("⚠️ There is no collection 'private'")
    assert [row[1] for row in view(ctx, "alice").rows] == ["reactors.md", "handbook.txt"]

    locator = "doc://private/reactors.md#section=Reactors"
    path, text = open_source(ctx, as_user("alice"), locator)
    assert path and path.endswith("reactors.md") and FACT in text
    assert ctx.files.may_read(path, "alice") and not ctx.files.may_read(path, "bob")
    nothing, why = open_source(ctx, as_user("bob"), locator)
    assert nothing is None and "yours to read" in why


def test_read_only_demo_refuses_to_add(with_documents, files):
    ctx = AppContext(with_documents, read_only=True)
    assert "read-only demo" in add_documents(ctx, None, [str(files / "reactors.md")], "papers")
    shown = view(ctx)
    assert shown.rows == [] and not shown.shared_visible and "**Read-only demo**" in shown.status


def test_without_tesseract_the_view_says_ocr_is_off_and_which_pages_wait(with_documents, files, monkeypatch):
    monkeypatch.setattr(ocr, "tesseract_path", lambda: None)
    ctx = AppContext(with_documents)
    report = add_documents(ctx, None, [str(files / "scan.pdf"), str(files / "reactors.md")], "mixed")
    assert "Added 2 files" in report and "1 image-only pages not read (OCR is off)" in report
    shown = view(ctx)
    assert "OCR is off: tesseract is not installed" in shown.status
    scan = next(row for row in shown.rows if row[1] == "scan.pdf")
    assert scan[3] == 0 and scan[8].startswith("image-only pages not read, OCR was off (p. 1)")


def test_a_runtime_without_a_document_store_says_so(runtime):
    ctx = AppContext(runtime)
    assert view(ctx).status.startswith("⚠️ Documents are not available")
    assert add_documents(ctx, None, ["x.md"], "c").startswith("⚠️ Documents are not available")


def test_the_same_document_under_two_names_is_listed_and_removable_by_every_user(with_documents, files, tmp_path):
    ctx = AppContext(with_documents, users=users(), files=UserFiles(tmp_path / "served"))
    copy = files / "copy-of-reactors.md"
    copy.write_bytes((files / "reactors.md").read_bytes())
    report = add_documents(ctx, as_user("root"), [str(files / "reactors.md"), str(copy)], "handbook", shared=True)
    assert report.startswith("Added 2 files to **shared/handbook**.")
    for who in ("alice", "bob", "root"):
        shown = view(ctx, who)
        assert "**2 files, 2 passages**" in shown.status
        assert [row[1:4] for row in shown.rows] == [["copy-of-reactors.md", "markdown", 1], ["reactors.md", "markdown", 1]]
    assert file_choices(ctx, as_user("root"), "shared/handbook") == [WHOLE_COLLECTION, "copy-of-reactors.md", "reactors.md"]
    assert "Removed **copy-of-reactors.md**" in remove_documents(ctx, as_user("root"), "shared/handbook", "copy-of-reactors.md")
    assert [row[1] for row in view(ctx, "bob").rows] == ["reactors.md"]


def test_a_damaged_manifest_row_is_listed_with_a_note_and_can_be_removed(with_documents, files):
    ctx = AppContext(with_documents)
    add_documents(ctx, None, [str(files / "reactors.md"), str(files / "handbook.txt")], "papers")
    manifest_path = with_documents.documents.root / "ns-default" / "collections" / "papers" / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["files"]["reactors.md"].update(passages=[{"text": FACT}], bytes="40", warnings=[3])
    manifest["files"]["handbook.txt"]["sha256"] = "../../../etc/passwd"
    manifest["files"]["stray.txt"] = ["not", "a", "row"]
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")

    shown = view(ctx)
    assert "**3 files, 1 passages**" in shown.status
    notes = {row[1]: (row[3], row[8]) for row in shown.rows}
    assert notes == {
        "handbook.txt": (1, "its record is damaged (sha256): remove it and add the file again"),
        "reactors.md": (0, "its record is damaged (bytes, passages, warnings): re-index or remove it"),
        "stray.txt": (0, "its record is damaged (sha256): remove it and add the file again"),
    }
    assert open_source(ctx, None, "doc://papers/handbook.txt") == (
        None, "⚠️ The record of 'handbook.txt' is damaged; remove it and add the file again.")
    assert "Re-indexed 1 files" in reindex_documents(ctx, None, "papers", "reactors.md")
    for name in ("stray.txt", "handbook.txt"):
        assert f"Removed **{name}** from **papers**" in remove_documents(ctx, None, "papers", name)
    assert [row[1:4] + [row[8]] for row in view(ctx).rows] == [["reactors.md", "markdown", 1, ""]]


def test_a_collection_whose_manifest_is_not_json_is_named_kept_and_can_be_removed(with_documents, files):
    ctx = AppContext(with_documents)
    add_documents(ctx, None, [str(files / "reactors.md")], "papers")
    add_documents(ctx, None, [str(files / "handbook.txt")], "rules")
    manifest_path = with_documents.documents.root / "ns-default" / "collections" / "papers" / "manifest.json"
    good = manifest_path.read_text(encoding="utf-8")
    manifest_path.write_text('{"files": {"reactors.md": ', encoding="utf-8")  # cut short

    shown = view(ctx)
    problem = ("the list of its files (documents/ns-default/collections/papers/manifest.json in the data folder) is "
               "damaged: it is not valid JSON at line 1, column 27; remove the collection and add its files again, or "
               "put back a good copy of that file")
    assert shown.rows == [["papers", "", "", 0, "", "", "", "", problem]] + [row for row in shown.rows if row[0] == "rules"]
    assert "⚠️ The collection **papers** is not searched: the list of its files" in shown.status
    assert shown.choices == ["papers", "rules"] and file_choices(ctx, None, "papers") == [WHOLE_COLLECTION]
    assert "cannot be read file by file" in remove_documents(ctx, None, "papers", "reactors.md")

    # While it is damaged, removing another collection keeps its content: a good copy put back finds it.
    assert "Removed the collection **rules** (1 files)" in remove_documents(ctx, None, "rules", WHOLE_COLLECTION)
    manifest_path.write_text(good, encoding="utf-8")
    assert [row[:4] + [row[8]] for row in view(ctx).rows] == [["papers", "reactors.md", "markdown", 1, ""]]
    assert ctx.runtime.documents.search("default", ["Quillmoor reactor"], 3)[0][0][0].text.endswith(FACT)

    manifest_path.write_text("[]", encoding="utf-8")
    assert "it holds no table of files" in view(ctx).rows[0][8]
    assert remove_documents(ctx, None, "papers", WHOLE_COLLECTION) == (
        "Removed the collection **papers**; the search no longer reads it.")
    assert view(ctx).rows == [] and not manifest_path.parent.exists()
