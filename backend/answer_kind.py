"""The kind of answer a question asks for (a country, a person, a date, a number with its unit, yes or
no, one of its options) and whether an answer is of that kind, checked without a model: places by
the names of countries and US states (backend.gazetteer), dates and numbers by their pattern.

An answer of another kind is not given as the answer: "In which country was the director of the film
Jaws born?" read "Pennsylvania", a state. The episode reads it again or researches once more, and
when nothing of the kind asked is found, the answer says what was found (`not_of_kind_answer`:
"found a state, Pennsylvania; not a country"). The checks only say no where they are sure: an answer
they cannot place (a person's name for "who", a town the gazetteer does not hold) passes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from backend.answer_match import shares_a_word
from backend.gazetteer import countries_in, is_also_a_city, is_country, is_us_state, states_in
from backend.hops import asked_kind

if TYPE_CHECKING:
    from backend.question import Question

COUNTRY, NATIONALITY, STATE, CITY = "country", "nationality", "state", "city"
PERSON, PLACE, DATE, NUMBER = "person", "place", "date", "number"
YES_NO, OPTION = "yes or no", "one of the options"

_PHRASE_KINDS = {"countri": COUNTRY, "nation": NATIONALITY, "state": STATE, "citi": CITY, "town": CITY,
                 "capit": CITY}
_CLASS_KINDS = {"<time>": DATE, "<count>": NUMBER, "<person>": PERSON, "<place>": PLACE}
_AMOUNT = re.compile(r"^\W*how\s+(?:old|long|tall|far|high|big|large|deep|wide|heavy|fast|much|many)\b", re.IGNORECASE)
_MONTHS = ("january february march april may june july august september october november december "
           "jan feb mar apr jun jul aug sep sept oct nov dec").split()
_TIME_WORDS = frozenset(_MONTHS + "century centuries decade decades spring summer autumn fall winter bc ad bce ce "
                        "monday tuesday wednesday thursday friday saturday sunday".split())
_NUMBER_WORDS = frozenset("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                          "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty "
                          "ninety hundred thousand million billion trillion dozen dozens hundreds thousands millions "
                          "half".split())


@dataclass(frozen=True)
class AnswerKind:
    """What a question asks for; `options` for a choice among named options."""

    name: str
    options: tuple[str, ...] = ()


def kind_asked(question: Question) -> AnswerKind | None:
    """What `question` asks for, or None when its words do not say (a bare "what"); Question.kind."""
    if question.choices:
        return AnswerKind(OPTION, question.choices)
    if question.yes_no:
        return AnswerKind(YES_NO)
    if _AMOUNT.match(question.text):
        return AnswerKind(NUMBER)
    # "U.S." ends asked_kind's phrase at its full stop: its wording with "US" is asked again.
    us = re.sub(r"\bU\.\s?S\.(?:\s?A\.)?", "US", question.text)
    asked = question.asks_for if us == question.text else asked_kind(us)
    if not asked:
        return None
    if asked[0] in _CLASS_KINDS:
        return AnswerKind(_CLASS_KINDS[asked[0]])
    for stem in reversed(asked):
        if stem in _PHRASE_KINDS:
            return AnswerKind(_PHRASE_KINDS[stem])
    return None


def _words(answer: str) -> list[str]:
    return re.findall(r"[^\W\d_]+|\d+", answer.casefold())  # "thirty-two" is two number words


def _is_time(answer: str) -> bool:
    return bool(re.search(r"\d", answer)) or any(word in _TIME_WORDS for word in _words(answer))


def _is_number(answer: str) -> bool:
    return bool(re.search(r"\d", answer)) or any(word in _NUMBER_WORDS for word in _words(answer))


def _only_a_number_or_date(answer: str) -> bool:
    """Nothing but digits and what goes with them ("1998", "27 June 1998", "3.5 million")."""
    words = _words(answer)
    return bool(words) and all(w.isdigit() or w in _TIME_WORDS or w in _NUMBER_WORDS for w in words)


_DEMONYM = re.compile(r"(?:[A-Z][a-z]+[- ])?[A-Z][a-z]+(?:an|ian|ese|ish|i|ic|ch|ss|k)")


def is_demonym(answer: str) -> bool:
    """A word that names a people ("American", "British", "Chinese", "French", "Swiss", "Greek")."""
    return bool(_DEMONYM.fullmatch(answer.strip())) and not is_us_state(answer)


def what_it_is(answer: str) -> str | None:
    """What the gazetteer or a pattern says `answer` is: "a country", "a state" (of the US), "a date or a
    number"; None when they do not know it."""
    if is_country(answer) and not is_us_state(answer):
        return "a country"
    if is_us_state(answer) and not is_country(answer):
        return "a state"
    if _only_a_number_or_date(answer):
        return "a date or a number" if not re.fullmatch(r"\s*\d[\d,.\s]*", answer) else "a number"
    return None


def is_of_kind(kind: AnswerKind, answer: str) -> bool:
    """Whether `answer` can be of the kind asked (True where the checks cannot tell)."""
    text = answer.strip()
    if not text:
        return False
    name = kind.name
    if name == OPTION:
        # An option named in full ("Dino Buzzati-Traverso" for "Dino Buzzati") or by a date the
        # comparison turns on ("1964"; HotpotQA has such gold answers) is of the kind.
        return any(shares_a_word(text, option) for option in kind.options) or bool(re.search(r"\d", text))
    if name == YES_NO:
        return True  # the reader answers these by choice; a gold answer that is no yes/no means the question was misread
    if name == DATE:
        return _is_time(text)
    if name == NUMBER:
        return _is_number(text)
    found = what_it_is(text)
    if name == COUNTRY:  # "American" for "What country of origin do they have in common?"
        return is_country(text) or bool(countries_in(text)) or is_demonym(text)
    if name == STATE:
        return found not in ("a country", "a number", "a date or a number") or is_us_state(text)
    if name == CITY:
        return found is None or is_also_a_city(text)
    if name == NATIONALITY:
        return found != "a state" and not _only_a_number_or_date(text)
    if name == PERSON:
        return found is None
    if name == PLACE:
        return found not in ("a number", "a date or a number")
    return True


def kind_problem(question: Question, answer: str) -> str | None:
    """Why `answer` is not of the kind `question` asks for, as "found a state, Pennsylvania; not a
    country", or None (of that kind, or the checks cannot tell)."""
    kind = question.kind
    if kind is None or not answer.strip() or is_of_kind(kind, answer):
        return None
    return not_of_kind_answer(kind, answer)


def not_of_kind_answer(kind: AnswerKind, answer: str) -> str:
    """The answer given when nothing of the kind asked was found: what was found, and that it is not that."""
    found = what_it_is(answer) or "an answer"
    wanted = {OPTION: f"one of {' or '.join(kind.options)}", YES_NO: "a yes or a no", PERSON: "a person",
              PLACE: "a place", DATE: "a date", NUMBER: "a number", CITY: "a city", STATE: "a state",
              COUNTRY: "a country", NATIONALITY: "a nationality"}[kind.name]
    return f"found {found}, {answer.strip()}; not {wanted}"


_NOT_OF_KIND = re.compile(r"^found (?:a|an) [^,]+, .+; not (?:a|an|one of) .+$")


def says_not_of_kind(answer: str) -> bool:
    """Whether an answer is `not_of_kind_answer`'s sentence: no answer of the kind asked."""
    return bool(_NOT_OF_KIND.match(answer.strip()))


def span_of_kind(kind: AnswerKind, text: str) -> str | None:
    """A name of the kind asked that `text` holds, where the gazetteer knows the kind: the country a
    sentence about Pennsylvania names ("… a state in the United States"); None otherwise."""
    if kind.name in (COUNTRY, NATIONALITY):
        found = [c for c in countries_in(text) if not is_us_state(c)]
        return found[0] if found else None
    if kind.name == STATE:
        found = [s for s in states_in(text) if not is_country(s)]
        return found[0] if found else None
    return None
