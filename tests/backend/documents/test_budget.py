"""Every document is read in a child process under its budget (mia.toml's [documents]): a file that
needs more pages, OCR calls, passages, memory or time than a document may have is refused with a
sentence naming the setting, and the other files of the same upload still go in. The budgets here
are scaled down so that small crafted files cross them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from backend.config import ConfigError, DocumentsConfig, load_config
from backend.documents import DocumentStore
from backend.runtime import document_store

from .conftest import PDF_PAGES, needs_tesseract, write_pdf
from .crafted_files import write_blank_image_pdf, write_docx_bomb, write_long_docx


def budgeted(tmp_path, **limits) -> DocumentStore:
    return DocumentStore(tmp_path / "documents", budget=replace(DocumentsConfig(), **limits))


@pytest.fixture
def good_file(tmp_path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("The lighthouse keeper counted 412 ships in the winter of 1911.\n", encoding="utf-8")
    return path


def refusal(report, name: str) -> str:
    assert [info.name for info in report.added] == ["notes.txt"], "the upload's other file still goes in"
    assert [failed for failed, _ in report.failed] == [name]
    return report.failed[0][1]


@needs_tesseract
def test_blank_image_pages_are_refused_before_any_ocr_call(tmp_path, good_file):
    # Today's OCR cap counted only pages where OCR found text: blank pictures were each read.
    scan = write_blank_image_pdf(tmp_path / "blank.pdf", pages=5)
    report = budgeted(tmp_path, max_ocr_calls=3).add_paths("alice", "c", [scan, good_file])
    assert refusal(report, "blank.pdf") == (
        "This PDF needs more than 3 OCR calls (5 images on pages without text), the limit per document "
        "(documents.max_ocr_calls in mia.toml); split it into smaller files, or add a copy with a text layer "
        "(a scanner's 'searchable PDF').")


def test_a_pdf_with_more_pages_than_allowed_is_refused(tmp_path, good_file):
    pdf = write_pdf(tmp_path / "report.pdf", PDF_PAGES)
    report = budgeted(tmp_path, max_pages=2).add_paths("alice", "c", [pdf, good_file])
    assert refusal(report, "report.pdf") == (
        "This PDF has 3 pages, more than the 2 pages that are the limit per document (documents.max_pages in "
        "mia.toml); split it into parts of at most 2 pages.")


def test_a_docx_of_many_paragraphs_is_refused_for_its_passages(tmp_path, good_file):
    long = write_long_docx(tmp_path / "long.docx", paragraphs=3000)
    report = budgeted(tmp_path, max_passages=50).add_paths("alice", "c", [long, good_file])
    assert refusal(report, "long.docx") == (
        "This DOCX needs more than 50 passages, the limit per document (documents.max_passages in mia.toml); "
        "split it into smaller files.")
    assert budgeted(tmp_path / "roomy", max_passages=1000).add_paths("alice", "c", [long]).failed == []


@pytest.mark.parametrize("paragraphs", [
    2_000_000,  # unpacking its XML runs out of memory
    200_000,  # the XML unpacks, and libxml2 runs out of memory parsing it (which it reports as a syntax error)
])
def test_a_docx_that_unpacks_to_more_than_its_memory_is_refused(tmp_path, good_file, paragraphs):
    bomb = write_docx_bomb(tmp_path / "bomb.docx", paragraphs=paragraphs)
    assert bomb.stat().st_size < 1_000_000
    report = budgeted(tmp_path, max_memory_mb=100, max_passages=10_000_000).add_paths("alice", "c", [bomb, good_file])
    assert refusal(report, "bomb.docx") == (
        "This DOCX needs more than 100 MB of memory to read, the limit per document (documents.max_memory_mb in "
        "mia.toml); split it into smaller files, or save it as PDF or plain text.")


@needs_tesseract
def test_reading_past_the_deadline_is_stopped(tmp_path, good_file):
    # 60 tesseract calls take far more than 2 s (each at least a tenth of a second to start).
    scan = write_blank_image_pdf(tmp_path / "blank.pdf", pages=60)
    report = budgeted(tmp_path, max_seconds=2, max_ocr_calls=100).add_paths("alice", "c", [scan, good_file])
    assert refusal(report, "blank.pdf") == (
        "This PDF takes more than 2 s to read, the limit per document (documents.max_seconds in mia.toml); "
        "split it into smaller files, or save it as PDF or plain text.")


def test_the_budget_is_read_from_mia_toml_and_the_environment(tmp_path):
    toml = tmp_path / "mia.toml"
    toml.write_text("[documents]\nmax_ocr_calls = 7\nmax_memory_mb = 512\n", encoding="utf-8")
    config = load_config(toml, environ={"MIA_DOCUMENTS_MAX_SECONDS": "45"})
    assert config.documents == replace(DocumentsConfig(), max_ocr_calls=7, max_memory_mb=512, max_seconds=45.0)
    config = replace(config, data_dir=tmp_path / "data")
    assert document_store(config).budget == config.documents
    with pytest.raises(ConfigError, match=r"^documents.max_memory_mb: must be at least 64"):
        load_config(toml, environ={"MIA_DOCUMENTS_MAX_MEMORY_MB": "10"})
    toml.write_text("[documents]\nmax_ocr = 7\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^documents.max_ocr: unknown setting"):
        load_config(toml, environ={})
