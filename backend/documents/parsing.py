"""A file's text with where each part stands: PDF pages (pypdf; image-only pages read by OCR),
Markdown, HTML and DOCX sections under their headings, plain-text paragraphs.

Every format is read by a maintained library (pypdf, markdown-it-py, lxml through
backend.tools.html_text, python-docx); a file that cannot be read is a ParseError naming the
file and why, never a crash of the whole upload. Pages, OCR calls and text are counted against
the document's budget as they are read (backend.documents.budget); time and memory are limited by
the process that reads it (backend.documents.parse_process).
"""

from __future__ import annotations

import logging
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from backend.config import DocumentsConfig
from backend.documents import ocr
from backend.documents.budget import Meter
from backend.documents.errors import ParseError
from backend.tools.html_text import html_sections, text_paragraphs

log = logging.getLogger(__name__)
logging.getLogger("pypdf").setLevel(logging.ERROR)  # pypdf warns about every odd object of real-world PDFs

FORMATS = {
    ".pdf": "pdf", ".md": "markdown", ".markdown": "markdown", ".txt": "text", ".text": "text",
    ".html": "html", ".htm": "html", ".docx": "docx",
}  # fmt: skip
MAX_DOCX_UNPACKED_BYTES = 300_000_000  # a DOCX is a zip: refuse one that unpacks to more than this
MIN_PAGE_TEXT_CHARS = 16  # a page with fewer visible characters than this is an image-only page (a scan)


@dataclass
class Section:
    """Consecutive paragraphs at one place of a file: a PDF page, or under one heading."""

    paragraphs: list[str]
    page: int | None = None
    heading: str | None = None
    ocr: bool = False  # read from an image by OCR


@dataclass
class ParsedFile:
    format: str
    sections: list[Section]
    pages: int = 0  # PDF pages
    ocr_pages: int = 0  # image-only pages read by OCR
    unread_pages: list[int] = field(default_factory=list)  # image-only pages left unread (OCR off or failed)
    ocr_on: bool = False  # whether OCR was available when the file was read
    warnings: list[str] = field(default_factory=list)


def supported_suffixes() -> list[str]:
    return sorted(FORMATS)


def file_format(name: str) -> str | None:
    return FORMATS.get(Path(name).suffix.lower())


def parse_file(path: Path, *, name: str | None = None, ocr_on: bool | None = None,
               budget: DocumentsConfig | None = None) -> ParsedFile:
    """The sections of the file at `path`; `name` (default: the file's) picks the format by its
    extension. `ocr_on`: whether image-only PDF pages are read by tesseract (default: when it is
    installed). `budget`: the pages, OCR calls and text it may have (default: mia.toml's defaults)."""
    name = name or Path(path).name
    kind = file_format(name)
    if kind is None:
        raise ParseError(f"{name}: unsupported format; supported: {', '.join(supported_suffixes())}.")
    meter = Meter(budget or DocumentsConfig(), kind)
    try:
        if kind == "pdf":
            parsed = _parse_pdf(Path(path), ocr.ocr_available() if ocr_on is None else ocr_on, meter)
        elif kind == "docx":
            parsed = _parse_docx(Path(path), meter)
        else:
            text = _decode(Path(path).read_bytes())
            if kind == "text":
                parsed = ParsedFile("text", [Section(text_paragraphs(text))])
            elif kind == "markdown":
                parsed = _parse_markdown(text)
            else:
                parsed = _from_html(text, "html")
    except ParseError as exc:
        raise type(exc)(f"{name}: {exc}") from None
    except MemoryError:  # the reading process's memory limit: parse_process says so
        raise
    except Exception as exc:  # a library's own error on a damaged file, whatever its class
        if _out_of_memory(exc):
            raise MemoryError(f"{name}: {exc}") from exc
        log.info("cannot parse %s", name, exc_info=True)
        raise ParseError(f"{name}: not a readable {kind.upper() if kind in ('pdf', 'docx', 'html') else kind} "
                         f"file ({type(exc).__name__}: {str(exc)[:160]}).") from None
    parsed.sections = [section for section in parsed.sections if section.paragraphs]
    if not parsed.sections and not parsed.unread_pages:
        raise ParseError(f"{name}: no text found in it.")
    return parsed


def _out_of_memory(exc: Exception) -> bool:
    """Whether libxml2 (lxml: DOCX and HTML) ran out of memory: it says so as a syntax error."""
    from lxml import etree

    if not isinstance(exc, etree.LxmlError):
        return False
    no_memory = etree.ErrorTypes.ERR_NO_MEMORY
    logged = getattr(exc, "error_log", ())
    return getattr(exc, "code", None) == no_memory or any(entry.type == no_memory for entry in logged)


def _decode(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise ParseError("not a text file (it holds binary data)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


# -- PDF -------------------------------------------------------------------------------------------
_HYPHENATED = re.compile(r"(\w)-\n(\w)")


def _pdf_paragraphs(text: str) -> list[str]:
    """A page's text as paragraphs: blank lines separate them when the PDF has any, else the page
    is one block; words hyphenated across lines are joined."""
    text = _HYPHENATED.sub(r"\1\2", text.replace("\r\n", "\n").replace("\r", "\n"))
    return text_paragraphs(text)


def _parse_pdf(path: Path, ocr_on: bool, meter: Meter) -> ParsedFile:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    with path.open("rb") as handle:
        if not handle.read(1024).lstrip().startswith(b"%PDF"):
            raise ParseError("not a PDF file (it does not start with %PDF)")
    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise ParseError("the PDF is password-protected; save an unprotected copy and add that")
        pages = reader.pages
        count = len(pages)
    except (FileNotDecryptedError, NotImplementedError):
        raise ParseError("the PDF is encrypted; save an unprotected copy and add that") from None
    except PdfReadError as exc:
        raise ParseError(f"not a readable PDF ({exc})") from None
    meter.pages(count)
    parsed = ParsedFile("pdf", [], pages=count, ocr_on=ocr_on)
    image_only = []  # (page number, its images, its few characters of text)
    for number in range(1, count + 1):
        try:
            page = pages[number - 1]
            text = page.extract_text() or ""
        except Exception as exc:  # one damaged page: the others still go in
            parsed.warnings.append(f"page {number} could not be read ({type(exc).__name__})")
            continue
        if len("".join(text.split())) >= MIN_PAGE_TEXT_CHARS:
            parsed.sections.append(Section(_pdf_paragraphs(text), page=number))
            meter.text(parsed.sections[-1].paragraphs)
            continue
        image_only.append((number, _page_images(page, number, parsed), text))
    if ocr_on:  # counted before the first call: OCR is what takes the time
        meter.ocr_calls(sum(len(images) for _, images, _ in image_only))
    for number, images, text in image_only:
        scanned = _read_images(images) if ocr_on else ""
        if scanned:
            parsed.sections.append(Section(_pdf_paragraphs(scanned), page=number, ocr=True))
            parsed.ocr_pages += 1
            continue
        if images:  # OCR is off, or read nothing
            parsed.unread_pages.append(number)
        if text.strip():
            parsed.sections.append(Section(_pdf_paragraphs(text), page=number))
    parsed.sections.sort(key=lambda section: section.page)
    return parsed


def _page_images(page, number: int, parsed: ParsedFile) -> list:
    """A page's images, not decoded yet ([] when they cannot be listed)."""
    try:
        return list(page.images)
    except Exception as exc:
        parsed.warnings.append(f"page {number}: its images could not be read ({type(exc).__name__})")
        return []


def _read_images(images: list) -> str:
    """The text of a page's images by OCR ('' when it reads nothing)."""
    texts = []
    for image in images:
        try:
            decoded = image.image
        except Exception:
            decoded = None
        if decoded is None:
            continue
        text = ocr.read_pil_image_text(decoded)
        if text:
            texts.append(text)
    return "\n\n".join(texts)


# -- Markdown and HTML -----------------------------------------------------------------------------
def _parse_markdown(text: str) -> ParsedFile:
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(text)
    return _from_html(f"<html><body>{html}</body></html>", "markdown")


def _from_html(html: str, kind: str) -> ParsedFile:
    _, sections = html_sections(html)
    return ParsedFile(kind, [Section(paragraphs, heading=heading) for heading, paragraphs in sections])


# -- DOCX ------------------------------------------------------------------------------------------
def _parse_docx(path: Path, meter: Meter) -> ParsedFile:
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.table import Table

    try:
        with zipfile.ZipFile(path) as archive:
            unpacked = sum(member.file_size for member in archive.infolist())
    except zipfile.BadZipFile:
        raise ParseError("not a DOCX file (a DOCX is a zip archive; this is not one)") from None
    if unpacked > MAX_DOCX_UNPACKED_BYTES:
        raise ParseError(f"it unpacks to {unpacked / 1e6:.0f} MB, more than the {MAX_DOCX_UNPACKED_BYTES / 1e6:.0f} MB allowed")
    document = docx.Document(str(path))
    headings = {style.style_id for style in document.styles if style.type == WD_STYLE_TYPE.PARAGRAPH
                and ((style.name or "").lower().startswith("heading") or style.name == "Title")}
    sections = [Section([])]
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            rows = _table_rows(block)
            meter.text(rows)
            sections[-1].paragraphs += rows
            continue
        text = " ".join(block.text.split())
        meter.text([text])
        # The style's id, not `block.style`: that looks the default style up among all of them for
        # every paragraph without one (2 ms each; 200,000 paragraphs took 257 s).
        if text and block._p.style in headings:
            sections.append(Section([], heading=text))
        elif text:
            sections[-1].paragraphs.append(text)
    return ParsedFile("docx", sections)


def _table_rows(table) -> list[str]:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            if text and (not cells or cells[-1] != text):  # a merged cell is repeated once per column
                cells.append(text)
        if cells:
            rows.append(" | ".join(cells))
    return rows
