"""Where a cited sentence stands in a text: the source view marks it in a passage's text and on a PDF
page's text layer, whose line breaks, hyphenation, ligatures and quotes differ from the text the
sentence was copied from. Letters and digits are compared alone, case-folded (NFKC)."""

from __future__ import annotations

import re
import unicodedata

MIN_PREFIX_CHARS = 40  # a sentence not found whole is looked for by its first letters, when it has this many
ELLIPSES = ("…", "...")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def _letters(text: str) -> tuple[str, list[int]]:
    """The text's letters and digits, case-folded, with the index in `text` each comes from."""
    kept: list[str] = []
    where: list[int] = []
    for index, char in enumerate(text):
        for part in unicodedata.normalize("NFKC", char).casefold():
            if part.isalnum():
                kept.append(part)
                where.append(index)
    return "".join(kept), where


def sentence_span(text: str, sentence: str) -> tuple[int, int] | None:
    """(start, end) of `sentence` in `text` (text[start:end] is it as the text writes it), or None.
    A sentence cut short with an ellipsis is found by what it keeps; one whose end differs by its first
    MIN_PREFIX_CHARS letters."""
    sentence = (sentence or "").strip()
    for ellipsis in ELLIPSES:
        sentence = sentence.removesuffix(ellipsis)
    wanted, _ = _letters(sentence)
    if not wanted or not text:
        return None
    letters, where = _letters(text)
    start = letters.find(wanted)
    if start >= 0:
        end = where[start + len(wanted) - 1] + 1
        return where[start], end + 1 if text[end:end + 1] in (".", "!", "?") else end
    if len(wanted) < MIN_PREFIX_CHARS:
        return None
    start = letters.find(wanted[:MIN_PREFIX_CHARS])
    if start < 0:
        return None
    end = _SENTENCE_END.search(text, where[start + MIN_PREFIX_CHARS - 1])  # the text's own end of that sentence
    return where[start], end.end() if end else len(text)
