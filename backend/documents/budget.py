"""What reading one document may cost (mia.toml's `[documents]`), counted while it is read: past a
limit the document is refused with an `OverBudget` sentence that names the limit, the setting that
sets it, and what the analyst can do instead."""

from __future__ import annotations

from backend.config import DocumentsConfig
from backend.documents.errors import ParseError
from backend.documents.passages import MAX_CHARS

LABELS = {"pdf": "PDF", "docx": "DOCX", "html": "HTML file", "markdown": "Markdown file", "text": "text file"}
SMALLER = "split it into smaller files"
SIMPLER = "split it into smaller files, or save it as PDF or plain text"


class OverBudget(ParseError):
    """Reading a document needs more than one of its limits; the message says which and what to do."""


def _setting(key: str) -> str:
    return f"the limit per document (documents.{key} in mia.toml)"


def too_slow(budget: DocumentsConfig, kind: str) -> OverBudget:
    return OverBudget(f"This {LABELS[kind]} takes more than {budget.max_seconds:g} s to read, "
                      f"{_setting('max_seconds')}; {SIMPLER}.")


def too_large(budget: DocumentsConfig, kind: str) -> OverBudget:
    return OverBudget(f"This {LABELS[kind]} needs more than {budget.max_memory_mb:,} MB of memory to read, "
                      f"{_setting('max_memory_mb')}; {SIMPLER}.")


class Meter:
    """What reading one document has taken so far; each count refuses past its limit."""

    def __init__(self, budget: DocumentsConfig, kind: str) -> None:
        self.budget = budget
        self.kind = kind
        self.chars = 0

    def pages(self, count: int) -> None:
        limit = self.budget.max_pages
        if count > limit:
            raise OverBudget(f"This {LABELS[self.kind]} has {count:,} pages, more than the {limit:,} pages that are "
                             f"{_setting('max_pages')}; split it into parts of at most {limit:,} pages.")

    def ocr_calls(self, images: int) -> None:
        """`images`: the images on pages without text, each one OCR call."""
        limit = self.budget.max_ocr_calls
        if images > limit:
            raise OverBudget(f"This {LABELS[self.kind]} needs more than {limit:,} OCR calls ({images:,} images on "
                             f"pages without text), {_setting('max_ocr_calls')}; {SMALLER}, or add a copy with a "
                             "text layer (a scanner's 'searchable PDF').")

    def text(self, paragraphs: list[str]) -> None:
        """Count paragraphs as they are read. A passage holds at most MAX_CHARS characters (a longer
        word is cut to that), so past max_passages * MAX_CHARS of them the document cannot fit, and
        reading it further is wasted."""
        self.chars += sum(min(len(word), MAX_CHARS) for paragraph in paragraphs for word in paragraph.split())
        if self.chars > self.budget.max_passages * MAX_CHARS:
            self.passages(self.budget.max_passages + 1)

    def passages(self, count: int) -> None:
        if count > self.budget.max_passages:
            raise OverBudget(f"This {LABELS[self.kind]} needs more than {self.budget.max_passages:,} passages, "
                             f"{_setting('max_passages')}; {SMALLER}.")
