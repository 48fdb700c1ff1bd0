"""The answer, read at a glance: the span with its unit ("27" where the cited sentence says "27 crowns
per tonne" reads "27 crowns"), the sentence that states it beside it (the first citation's: no model
call), an answer of another kind than the question asks for marked as such, and while the run works
the best answer so far (a hop's answer, or the Executor's draft)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from backend.answer_kind import says_not_of_kind
from backend.events import AnswerReady, Event, ExecutorThought, HopAnswered
from backend.tools.text_ranking import tokenize

# Units a bare number is read with when the cited sentence puts one right after it.
UNITS = frozenset("""
km kilometres kilometers kilometre kilometer m metres meters metre meter cm mm mi miles mile ft feet foot in inches
kg kilograms kilogram g grams t tonnes tonne tons ton lb lbs pounds pound oz
km2 sq acres acre hectares hectare ha
s sec seconds second min minutes minute h hours hour days day weeks week months month years year decades centuries
mph kph km/h knots
people persons residents inhabitants members employees students seats votes episodes pages copies
percent % °c °f degrees
dollars dollar usd euros euro eur pounds gbp yen crowns crown francs rupees
""".split())
_NUMBER = re.compile(r"^\s*[$€£¥]?\d[\d,.\s]*\s*$")


def with_unit(answer: str, sentence: str, question: str = "") -> str:
    """A bare number with the unit the sentence gives right after it ("27" -> "27 crowns"), where that
    word is a unit or a word the question uses; the answer as it is otherwise."""
    if not _NUMBER.match(answer) or not sentence:
        return answer
    number = answer.strip()
    found = re.search(rf"(?<![\w.,]){re.escape(number)}\s*(%|[^\W\d_][\w/°]*)", sentence)
    if not found:
        return answer
    unit = found.group(1)
    asked = set(tokenize([question])[0]) if question else set()
    if unit.casefold() in UNITS or (asked and set(tokenize([unit])[0]) & asked):
        return f"{number}{unit}" if unit == "%" else f"{number} {unit}"
    return answer


def stating_sentence(answer: AnswerReady) -> str:
    """The sentence the answer's first citation quotes, or ""."""
    return next((c.get("sentence") or "" for c in answer.sources if c.get("sentence")), "")


def is_not_of_kind(answer: AnswerReady) -> bool:
    """The answer says no answer of the kind the question asks for was found (backend.answer_kind)."""
    return says_not_of_kind(answer.text)


def best_so_far(events: Sequence[Event]) -> tuple[str, str] | None:
    """While a run works and has no answer yet: (answer, where it comes from) of its latest researched
    hop with an answer, or of the Executor's latest draft; None when there is neither."""
    for event in reversed(events):
        if isinstance(event, AnswerReady):
            return None
        if isinstance(event, HopAnswered) and event.answer:
            where = event.sentence.partition(": ")[0] if event.sentence else "no retrieved sentence states it yet"
            return event.answer, f"hop {event.number}, {event.question} ({where})"
        if isinstance(event, ExecutorThought) and getattr(event, "draft", None):
            return event.draft, "a draft: no retrieved sentence states it yet, the research goes on"
    return None


def also_read(answer: AnswerReady) -> list[str]:
    """The passages in front of the model as it answered that the answer does not cite, by title."""
    cited = {c.get("title") for c in answer.sources}
    return [title for title in dict.fromkeys(answer.read_from) if title and title not in cited]
