"""Image-only PDF pages are read by tesseract and labelled as OCR; without tesseract indexing goes on
and says which pages it could not read; an image file's text is read for a question's caption."""

from __future__ import annotations

from PIL import Image, ImageDraw, ImageFont

from backend.documents import ocr, ocr_available, ocr_status, parse_file, read_image_text

from .conftest import OCR_TEXT, PDF_PAGES, needs_tesseract, write_image_pdf, write_pdf


@needs_tesseract
def test_an_image_only_pdf_page_is_read_by_ocr_and_labelled(store, tmp_path):
    scan = write_image_pdf(tmp_path / "scan.pdf")
    parsed = parse_file(scan)
    assert parsed.ocr_on and parsed.ocr_pages == 1 and parsed.unread_pages == []
    assert parsed.sections[0].ocr and parsed.sections[0].page == 1
    assert " ".join(parsed.sections[0].paragraphs) == OCR_TEXT

    report = store.add_paths("alice", "scans", [scan])
    assert report.indexed[0].ocr_pages == 1 and "1 read by OCR" in report.lines()[0]
    passage, _ = store.search("alice", ["pelican code"], 3)[0][0]
    assert passage.title == "scan.pdf p. 1 (OCR)" and passage.url == "doc://scans/scan.pdf#page=1"
    assert "7319" in passage.text


@needs_tesseract
def test_text_pages_are_not_sent_to_ocr(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(ocr, "read_pil_image_text", lambda image, **_: calls.append(image) or "")
    parsed = parse_file(write_pdf(tmp_path / "text.pdf", PDF_PAGES))
    assert calls == [] and parsed.ocr_pages == 0


def index_a_scan_and_a_text_pdf_without_tesseract(store, tmp_path, monkeypatch):
    monkeypatch.setattr(ocr, "tesseract_path", lambda: None)
    scan = write_image_pdf(tmp_path / "scan.pdf")
    text = write_pdf(tmp_path / "text.pdf", PDF_PAGES)
    return store.add_paths("alice", "mixed", [scan, text])


def test_without_tesseract_the_page_is_reported_and_the_rest_goes_in(store, tmp_path, monkeypatch):
    report = index_a_scan_and_a_text_pdf_without_tesseract(store, tmp_path, monkeypatch)
    assert not ocr_available()
    assert ocr_status().startswith("OCR is off: tesseract is not installed") and "apt-get install tesseract-ocr" in ocr_status()
    assert report.failed == []
    by_name = {info.name: info for info in report.indexed}
    assert by_name["scan.pdf"].unread_pages == [1] and not by_name["scan.pdf"].ocr_on
    assert by_name["scan.pdf"].passages == 0 and by_name["text.pdf"].passages == 3
    assert "1 image-only pages not read (OCR is off)" in " ".join(report.lines())
    assert read_image_text(tmp_path / "scan.pdf") is None


@needs_tesseract
def test_once_tesseract_is_installed_reindexing_reads_the_unread_page(store, tmp_path, monkeypatch):
    index_a_scan_and_a_text_pdf_without_tesseract(store, tmp_path, monkeypatch)
    monkeypatch.undo()
    again = store.reindex("alice", "mixed", "scan.pdf")
    assert again.indexed[0].ocr_pages == 1 and again.indexed[0].unread_pages == []
    assert store.search("alice", ["pelican code"], 3)[0][0][0].title == "scan.pdf p. 1 (OCR)"


@needs_tesseract
def test_read_image_text_gives_a_question_images_text(tmp_path):
    sign = Image.new("RGB", (1200, 400), "white")
    ImageDraw.Draw(sign).text((50, 150), "CAFE DU PORT", fill="black", font=ImageFont.load_default(size=100))
    sign.save(tmp_path / "sign.png")
    assert read_image_text(tmp_path / "sign.png") == "CAFE DU PORT"
    blank = Image.new("RGB", (600, 400), "white")
    blank.save(tmp_path / "blank.png")
    assert read_image_text(tmp_path / "blank.png") == ""
    (tmp_path / "not-an-image.png").write_text("hello")
    assert read_image_text(tmp_path / "not-an-image.png") is None


def test_ocr_noise_lines_are_dropped():
    assert ocr.clean_ocr_text("| ~ _ .\nReal   words here\n\n\n-- —\nSecond para\n") == "Real words here\n\nSecond para"
