"""Two-option comparisons decided from the facts the reader wrote down, not by the model's feel for
which is earlier or larger.

"Who was older, George Atzerodt or Andrew Johnson?": a 1.5B model with both birth dates in front of
it still picks the wrong name. It copies each option's fact well ("born September 12, 1835",
"born December 29, 1808"); the comparison itself is done here. A question whose comparison is not
about time or quantity, or facts without a date or number, return None: the caller then chooses
among the options with the facts in view.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MONTHS = {name: i for i, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}  # by first 3 letters
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_YEAR = r"(\d{3,4})(?!\d)(\s*(?:bc|bce)\b)?"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})\s+{_MONTH}\s*,?\s+{_YEAR}", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\s*,?\s+{_YEAR}", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\s+{_YEAR}", re.IGNORECASE)
_BARE_YEAR = re.compile(rf"(?<![\d.,]){_YEAR}", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(\s*(?:million|billion|thousand)\b)?", re.IGNORECASE)
_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9}

# Order matters: "more recent" is about time before "more" is about quantity.
_EARLIEST = re.compile(r"\b(older|oldest|first|earlier|earliest|sooner|before)\b", re.IGNORECASE)
_LATEST = re.compile(r"\b(younger|youngest|(?:more|most) recent(?:ly)?|recently|later|latest|newer|newest|last)\b", re.IGNORECASE)
_MOST = re.compile(r"\b(more|most|larger|largest|bigger|biggest|higher|highest|taller|tallest|longer|longest|greater|greatest)\b", re.IGNORECASE)
_FEWEST = re.compile(r"\b(fewer|fewest|less|least|smaller|smallest|lower|lowest|shorter|shortest)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Comparison:
    """What a two-option question compares: dates ("older", "first") or amounts ("more species"),
    and whether it wants the smaller or the larger value."""

    kind: str  # "date" | "number"
    wants_smallest: bool


def comparison_of(question: str) -> Comparison | None:
    """The comparison a question asks for, or None when it is not about time or quantity."""
    if _LATEST.search(question):
        return Comparison("date", wants_smallest=False)
    if _EARLIEST.search(question):
        return Comparison("date", wants_smallest=True)
    if _FEWEST.search(question):
        return Comparison("number", wants_smallest=True)
    if _MOST.search(question):
        return Comparison("number", wants_smallest=False)
    return None


def _year(digits: str, era: str | None) -> int:
    return -int(digits) if era else int(digits)


def first_date(text: str) -> tuple[int, int, int] | None:
    """The earliest-written date in `text` as (year, month, day), month and day 0 when not given."""
    found: list[tuple[int, tuple[int, int, int]]] = []
    for match in _DAY_MONTH_YEAR.finditer(text):
        found.append((match.start(), (_year(match.group(3), match.group(4)), _MONTHS[match.group(2).lower()[:3]], int(match.group(1)))))
    for match in _MONTH_DAY_YEAR.finditer(text):
        found.append((match.start(), (_year(match.group(3), match.group(4)), _MONTHS[match.group(1).lower()[:3]], int(match.group(2)))))
    if not found:
        for match in _MONTH_YEAR.finditer(text):
            found.append((match.start(), (_year(match.group(2), match.group(3)), _MONTHS[match.group(1).lower()[:3]], 0)))
    if not found:
        for match in _BARE_YEAR.finditer(text):
            found.append((match.start(), (_year(match.group(1), match.group(2)), 0, 0)))
    return min(found)[1] if found else None


def first_number(text: str) -> float | None:
    """The first amount written in `text` ("about 1,200 species", "3.5 million"), or None."""
    match = _NUMBER.search(text)
    if not match:
        return None
    value = float(match.group(1).replace(",", "") + (f".{match.group(2)}" if match.group(2) else ""))
    return value * _SCALE[match.group(3).strip().lower()] if match.group(3) else value


def decide(comparison: Comparison, facts: dict[str, str]) -> str | None:
    """The option whose fact has the wanted value, or None when a fact lacks a value, the values
    tie, or a date is only a year against a full date in the same year."""
    if len(facts) != 2:
        return None
    read = first_date if comparison.kind == "date" else first_number
    values = {option: read(fact) for option, fact in facts.items()}
    if any(value is None for value in values.values()):
        return None
    (a, va), (b, vb) = values.items()
    if comparison.kind == "date" and va[0] == vb[0] and 0 in (va[1], vb[1]):
        return None
    if va == vb:
        return None
    smaller = a if va < vb else b
    return smaller if comparison.wants_smallest else (b if smaller == a else a)
