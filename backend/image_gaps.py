"""What the text in a question's image leaves to search.

An image's text covers what it is about, not the whole question. Seen on rendered `train` pages
(benchmarks/image_questions.py): with one of a comparison's two people on the page, the Executor
searched that person again and answered from a made-up date for the other; with a page naming the
region a question describes, it searched the question's words and never the region. So, when a
question comes with image text:

- a comparison's every option needs a passage about it (the page's heading, or a retrieved passage's
  title): the first option without one is searched by its name;
- a page whose heading the question does not name introduced the bridge: its heading is searched,
  unless the question asks about the image itself ("the notice in this image"): then the image is
  the subject, not a first hop.

Each is searched once; no model call writes these queries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from backend.tools.text_ranking import tokenize

if TYPE_CHECKING:
    from backend.question import Question

_HEADING_MAX_WORDS = 8
_COMPARING = re.compile(r"\b(?:first|earlier|earliest|older|oldest|younger|youngest|later|both)\b", re.IGNORECASE)
_CAPITALISED = re.compile(r"\b[A-Z0-9][\w'’.&-]*")
_THE_IMAGE = re.compile(r"\b(?:this|the|that)\s+(?:image|picture|photo|photograph|scan|screenshot|notice|sign|poster|"
                        r"page|document|label|chart|flag)\b|\b(?:pictured|shown here)\b", re.IGNORECASE)


def image_heading(text: str) -> str:
    """The first line of an image's text when it reads as a heading (a few words, no sentence), else ""."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    words = first.split()
    if not words or len(words) > _HEADING_MAX_WORDS or first.endswith((".", ",", ":", ";")):
        return ""
    return first


def compared_things(question: Question) -> list[str]:
    """The things a question compares: a choice's options, or the names of a yes/no question or of a
    question asking which came first (older, both ...); [] for any other question."""
    if question.choices:
        return list(question.choices)
    names = [part for name in question.names for part in _split_pair(name)]
    if len(names) >= 2 and (question.yes_no or _COMPARING.search(question.text)):
        return names
    return []


def _split_pair(name: str) -> list[str]:
    """"Random House Tower and 888 7th Avenue" -> both names (a name with "and" inside keeps it when
    a side does not start like a name)."""
    parts = re.split(r"\s+and\s+", name)
    return parts if len(parts) == 2 and all(_CAPITALISED.match(part) for part in parts) else [name]


def _name_words(text: str) -> set[str]:
    """The words of a thing's name: its capitalised words ("two scientists Ernst Messerschmid" ->
    ernst, messerschmid), or all its words when none is capitalised."""
    capitalised = " ".join(_CAPITALISED.findall(text))
    return set(tokenize([capitalised or text])[0])


def is_about(title: str, thing: str) -> bool:
    """Whether a passage titled `title` is about `thing`: one's name words hold the other's."""
    title_words, thing_words = _name_words(title), _name_words(thing)
    return bool(title_words and thing_words) and (thing_words <= title_words or title_words <= thing_words)


def gap_query(question: Question, heading: str, titles: Iterable[str], searched: set[str]) -> str | None:
    """The search the image's text leaves to do (see the module's docstring), or None. `heading`: the
    image text's heading ("" if none); `titles`: the retrieved passages' titles; `searched`: the
    queries searched so far, lower-cased."""
    about = [heading, *titles] if heading else list(titles)
    compared = compared_things(question)
    for thing in compared:
        first = _CAPITALISED.search(thing)
        name = thing[first.start():] if first else thing  # "two scientists Ernst Messerschmid": the name
        if name.lower() not in searched and not any(is_about(title, thing) for title in about):
            return name
    if compared or not heading or heading.lower() in searched or _THE_IMAGE.search(question.text):
        return None
    heading_words, asked = _name_words(heading), set(tokenize([question.text])[0])
    return heading if heading_words and not heading_words <= asked else None
