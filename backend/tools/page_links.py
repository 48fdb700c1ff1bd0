"""The wiki's pages that a retrieved paragraph names, and the one the question most likely needs next.

A bridge question ("Who starred in The Hard Way and was featured on the roster of Rawkus Records?")
is answered by a page that the first page names but the question does not ("Mos Def", named in the
paragraph on The Hard Way). A reader of Wikipedia follows that link; this sandbox keeps no links, so
a page counts as named where its title (without a "(disambiguation)" tail) stands in the text as a
whole name: not a part of a longer capitalised name ("School" in "Jefferson High School"). On the
first 80 `train` questions, in 25 of the 34 misses of the Executor alone that had retrieved one of
the two gold paragraphs, the other one was named in a retrieved paragraph like this.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from backend.tools.text_ranking import rank_texts

_TAIL = re.compile(r"\s*\([^)]*\)$")
_WORD = re.compile(r"\S+")
_SENTENCE_END = (".", "!", "?", ":", ";")
_OPENING = "\"'(“‘["
_INITIAL = re.compile(r"[A-Z]\.")


class PageLink(NamedTuple):
    """A page to follow (`title`) and the retrieved page that names it (`named_in`)."""

    title: str
    named_in: str


def base_name(title: str) -> str:
    """A title without its disambiguating tail: "Las Vegas Outlaws (XFL)" -> "Las Vegas Outlaws"."""
    return _TAIL.sub("", title).strip()


class PageLinks:
    """Which titles of a set of pages a text names, by whole names."""

    def __init__(self, titles: Iterable[str]) -> None:
        self._titles: dict[str, list[str]] = {}  # base name -> the titles that share it
        self._by_first_word: dict[str, list[str]] = {}
        for title in titles:
            name = base_name(title)
            if len(name) < 3 or not name[0].isupper():
                continue
            if name not in self._titles:
                self._by_first_word.setdefault(name.split()[0], []).append(name)
            self._titles.setdefault(name, []).append(title)

    def named_in(self, text: str) -> list[str]:
        """The titles whose name stands in `text` as a whole name, in order of first mention."""
        words = list(_WORD.finditer(text))
        found: list[str] = []
        for position, match in enumerate(words):
            word = match.group().lstrip(_OPENING)
            start = match.end() - len(word)
            for key in dict.fromkeys((word, word.rstrip(".,;:!?)\"'”’"))):
                for name in self._by_first_word.get(key, ()):
                    end = start + len(name)
                    if text.startswith(name, start) and (end == len(text) or not text[end].isalnum()) \
                            and self._whole_name(words, position, text, end):
                        titles = self._titles[name]
                        found.extend([name] if name in titles else titles)  # the plain article, where one exists
        return list(dict.fromkeys(found))

    @staticmethod
    def _whole_name(words: list[re.Match], position: int, text: str, end: int) -> bool:
        """The name is not the tail or the head of a longer capitalised name ("School" in "Jefferson
        High School", "Fox" in "Michael J. Fox"); a sentence's capitalised first word does not count."""
        after = text[end:end + 2]
        if after[:1] == " " and after[1:2].isupper():
            return False
        if position == 0:
            return True
        before = words[position - 1].group().lstrip(_OPENING)
        if not before[:1].isupper():
            return True
        if _INITIAL.fullmatch(before):
            return False
        if not before[-1:].isalnum():
            return True
        return position == 1 or words[position - 2].group().endswith(_SENTENCE_END)  # `before` opens a sentence


def next_page(question: str, candidates: dict[str, str]) -> str | None:
    """Of the named pages `candidates` (title -> text), the one whose text matches the question best
    (BM25 over the candidates); None when none shares a word with the question."""
    titles = list(candidates)
    ranked = rank_texts([f"{title}. {candidates[title]}" for title in titles], question)
    return titles[ranked[0][0]] if ranked else None
