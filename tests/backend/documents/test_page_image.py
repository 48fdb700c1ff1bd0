"""A PDF page rendered with a cited sentence marked (backend/documents/page_image.py, in a child
process) and where a sentence stands in a text (backend/tools/sentence_span.py)."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from backend.config import DocumentsConfig
from backend.documents.page_image import RenderError, render_page
from backend.tools.sentence_span import sentence_span

LONG = ("The Quillmoor reactor opened in 1987 after a decade of construction, and its sentence runs on across "
        "the line break so that the mark needs two boxes on the page.")


def two_page_pdf(path):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, "Annual survey of northern power stations. This page lists no opening dates.")
    pdf.add_page()
    pdf.multi_cell(0, 8, "Intro words here. " + LONG + " Another sentence follows.")
    pdf.output(str(path))
    return path


def test_a_sentence_is_found_across_line_breaks_hyphens_ligatures_and_quotes():
    text = "Intro. The Quillmoor re-\r\nactor opened in 1987 after a decade of ﬁne work. Next one."
    start, end = sentence_span(text, "“The Quillmoor reactor opened in 1987 after a decade of fine work.”")
    assert text[start:end] == "The Quillmoor re-\r\nactor opened in 1987 after a decade of ﬁne work."
    start, end = sentence_span(text, "The Quillmoor reactor opened in 1987 after a decade of rough work and more")
    assert text[start:end].endswith("ﬁne work.")  # found by its first letters, to the text's own full stop
    assert sentence_span(text, "The Quillmoor reactor opened in 1987 after a decade…") is not None
    assert sentence_span(text, "Nothing of the kind.") is None and sentence_span("", "x") is None


def test_the_cited_sentence_is_marked_on_its_page_in_two_boxes(tmp_path):
    image = render_page(two_page_pdf(tmp_path / "stations.pdf"), 2, LONG, DocumentsConfig())
    assert (image.page, image.pages, image.found) == (2, 2, True)
    assert len(image.boxes) == 2  # one per line the sentence spans
    first, second = image.boxes
    assert first[1] < second[1] and all(0 <= b[0] < b[2] <= image.width and 0 <= b[1] < b[3] <= image.height
                                        for b in image.boxes)
    picture = Image.open(io.BytesIO(image.png)).convert("RGB")
    assert picture.size == (image.width, image.height) == (900, picture.height)
    left, top, right, bottom = first
    inside = picture.getpixel(((left + right) // 2, top + 3))
    assert inside[2] < 200 and inside[0] > 200, "the mark tints the sentence yellow"
    assert picture.getpixel((5, image.height - 5)) == (255, 255, 255)  # the rest of the page is as printed


def test_a_page_without_the_sentence_comes_back_unmarked_and_bad_requests_are_refused(tmp_path):
    pdf = two_page_pdf(tmp_path / "stations.pdf")
    image = render_page(pdf, 1, LONG, DocumentsConfig())
    assert not image.found and image.boxes == []
    with pytest.raises(RenderError, match="has 2 pages, not a page 3"):
        render_page(pdf, 3, LONG, DocumentsConfig())
    damaged = tmp_path / "damaged.pdf"
    damaged.write_bytes(b"%PDF-1.4 and nothing more")
    with pytest.raises(RenderError, match="cannot be opened"):
        render_page(damaged, 1, LONG, DocumentsConfig())
