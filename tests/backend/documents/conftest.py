"""Fixtures for the documents tests: one real file of each format (made by the libraries that write
them: fpdf2, python-docx, Pillow), a damaged one, and stores on the real MiniLM embedder that count
what they embed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from backend.documents import DocumentStore

FACT = ("The Quillmoor reactor was commissioned in 1987 by the engineer Ada Vantrell, "
        "who ran it until its closure in 2004.")
PDF_PAGES = [
    "Annual report of the Harbour Trust. Page one covers the harbour's history and its founding charter.",
    "Page two: the lighthouse keeper's log. The keeper counted 412 ships in the winter of 1911.",
    "Page three: accounts. The trust spent 3,400 pounds on the northern breakwater.",
]
OCR_TEXT = "PELICAN CODE 7319"
needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None,
                                     reason="tesseract is not installed (apt-get install tesseract-ocr)")


def write_pdf(path: Path, pages: list[str]) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    pdf.output(str(path))
    return path


def write_image_pdf(path: Path, text: str = OCR_TEXT) -> Path:
    """A one-page PDF that is only a picture of `text` (a scan): no text layer at all."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", (1400, 500), 255)
    ImageDraw.Draw(image).text((60, 180), text, fill=0, font=ImageFont.load_default(size=90))
    image.save(path, "PDF", resolution=150)
    return path


def write_docx(path: Path) -> Path:
    import docx

    document = docx.Document()
    document.add_paragraph("Prepared for the board.")
    document.add_heading("Budget", level=1)
    document.add_paragraph("The budget for the new archive is 5 million euros.")
    table = document.add_table(rows=2, cols=2)
    for row, cells in zip(table.rows, [("Item", "Cost"), ("Shelving", "1.2 million")]):
        row.cells[0].text, row.cells[1].text = cells
    document.add_heading("Schedule", level=2)
    document.add_paragraph("Building starts in March.")
    document.save(str(path))
    return path


MARKDOWN = f"""Preface before any heading.

# Reactors

{FACT}

## Later years

The site became a museum.

```
# a comment in code, not a heading
```
"""
HTML = """<html><head><title>Field notes</title><script>alert('x')</script></head><body>
<nav>Home | About</nav><p>Opening remarks.</p>
<h1>Birds of the <em>estuary</em></h1><p>Avocets nest on the mudflats in April.</p>
<h2>Waders</h2><ul><li>Curlews feed at low tide.</li></ul></body></html>"""


@pytest.fixture
def sample_dir(tmp_path) -> Path:
    """A folder with one good file of each format, plus a damaged PDF and a file of another type."""
    folder = tmp_path / "samples"
    (folder / "notes").mkdir(parents=True)
    write_pdf(folder / "report.pdf", PDF_PAGES)
    (folder / "notes" / "reactors.md").write_text(MARKDOWN, encoding="utf-8")
    (folder / "plain.txt").write_text("First paragraph about kittens.\n\nSecond paragraph about puppies.\n",
                                      encoding="utf-8")
    (folder / "field.html").write_text(HTML, encoding="utf-8")
    write_docx(folder / "board.docx")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 50)
    (folder / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    return folder


class CountingEmbedder:
    """The real MiniLM embedder, counting the texts it encodes (the identity probe aside)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.texts: list[str] = []

    def encode(self, texts):
        from backend.tools.wiki_index import EMBEDDER_PROBE

        self.texts += [text for text in texts if text != EMBEDDER_PROBE]
        return self.inner.encode(texts)


@pytest.fixture
def counting_embedder(embedder) -> CountingEmbedder:
    return CountingEmbedder(embedder)


@pytest.fixture
def store(tmp_path, counting_embedder) -> DocumentStore:
    return DocumentStore(tmp_path / "documents", embedder=counting_embedder)


@pytest.fixture(scope="session")
def wiki_cache_dir_shared() -> Path:
    """Where the session's shared tools keep the sandbox wiki's index (tests/conftest.py shared_tools)."""
    return Path(__file__).resolve().parents[3] / ".mia" / "test-cache" / "index"


@pytest.fixture(scope="session")
def wiki_search(shared_tools):
    """The real `search` tool on the sandbox wiki (BM25), without documents."""
    return shared_tools["search"]
