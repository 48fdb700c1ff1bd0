"""A parsed file cut into passages the size of the wiki's paragraphs, each keeping where it stands.

A passage never spans two pages or two headings. Paragraphs are joined up to TARGET_CHARS; a longer
paragraph is cut between sentences (a sentence longer than MAX_CHARS between words), so that
MiniLM, which reads about 1,000 characters (256 word pieces), sees each passage whole.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from backend.documents.naming import Locator
from backend.tools.text_ranking import split_sentences

if TYPE_CHECKING:  # parsing counts text against MAX_CHARS (backend.documents.budget)
    from backend.documents.parsing import ParsedFile

TARGET_CHARS = 700  # the sandbox wiki's median paragraph has 490 characters
MAX_CHARS = 1000


@dataclass(frozen=True)
class DocPassage:
    text: str
    page: int | None = None
    heading: str | None = None
    ocr: bool = False

    def to_dict(self) -> dict:
        return {key: value for key, value in asdict(self).items() if value not in (None, False)}

    @classmethod
    def from_dict(cls, row: dict) -> DocPassage:
        return cls(text=row["text"], page=row.get("page"), heading=row.get("heading"), ocr=bool(row.get("ocr")))

    def title(self, file: str) -> str:
        """'<file> p. 3', '<file> § Heading' or '<file>'; '(OCR)' when read from an image."""
        where = f" p. {self.page}" if self.page is not None else f" § {self.heading}" if self.heading else ""
        return f"{file}{where}{' (OCR)' if self.ocr else ''}"

    def locator(self, collection: str, file: str, *, shared: bool = False) -> str:
        return str(Locator(collection=collection, file=file, shared=shared, page=self.page,
                           section=None if self.page is not None else self.heading))


def split_passages(parsed: ParsedFile) -> list[DocPassage]:
    passages: list[DocPassage] = []
    for section in parsed.sections:
        where = dict(page=section.page, heading=section.heading, ocr=section.ocr)
        passages += [DocPassage(text, **where) for text in _chunks(section.paragraphs)]
    return passages


def _pack(pieces: list[str], separator: str, limit: int) -> list[str]:
    """The pieces joined by `separator` into runs of at most `limit` characters (a longer piece alone)."""
    packed: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + len(separator) + len(piece) > limit:
            packed.append(current)
            current = piece
        else:
            current = f"{current}{separator}{piece}" if current else piece
    if current:
        packed.append(current)
    return packed


def _chunks(paragraphs: list[str]) -> list[str]:
    return _pack([piece for paragraph in paragraphs for piece in _fit(paragraph)], "\n", TARGET_CHARS)


def _fit(paragraph: str) -> list[str]:
    """The paragraph as pieces of at most MAX_CHARS, cut between sentences, then between words."""
    paragraph = " ".join(paragraph.split())
    if len(paragraph) <= MAX_CHARS:
        return [paragraph] if paragraph else []
    parts = [part for sentence in split_sentences(paragraph) for part in _words_within(sentence, MAX_CHARS)]
    return _pack(parts, " ", TARGET_CHARS)


def _words_within(text: str, limit: int) -> list[str]:
    if len(text) <= limit:
        return [text]
    return _pack([word[:limit] for word in text.split()], " ", limit)
