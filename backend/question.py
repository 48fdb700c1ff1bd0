"""A question, parsed once: what the roles, tools and judge read of it.

An episode parses its question where it starts (backend.episode) and hands the `Question` to the
Executor, the reader, the hops, the Judge, the Manager, taught answers, evidence and image gaps;
none of them parses the question's text again. The rules stay with the parsers it calls
(backend.evidence, backend.hops, backend.answer_kind); this module only holds their results. A text
written during a run (a sub-question, a rewritten follow-up) is another question, parsed once
where it is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.answer_kind import AnswerKind, kind_asked
from backend.evidence import choice_options, closed_options, is_yes_no_question, named_pair, named_phrases
from backend.hops import asked_kind


@dataclass(frozen=True)
class Question:
    """`text` as asked, `image_text` the text OCR read in its image ("" without one); the rest is
    parsed from `text` when the value is made (Question.parse)."""

    text: str
    image_text: str = ""
    choices: tuple[str, ...] = field(init=False)  # the options it names ("..., A or B?"): choice_options
    options: tuple[str, ...] = field(init=False)  # the answers it allows, its choices or yes/no: closed_options
    yes_no: bool = field(init=False)  # it opens with an auxiliary verb and names no options: is_yes_no_question
    asks_for: tuple[str, ...] | None = field(init=False)  # what it asks for: backend.hops.asked_kind
    names: tuple[str, ...] = field(init=False)  # quoted titles and capitalised names: named_phrases
    pair: tuple[str, ...] = field(init=False)  # two things an open question asks about together: named_pair
    kind: AnswerKind | None = field(init=False)  # the kind of answer it asks for: backend.answer_kind.kind_asked

    def __post_init__(self) -> None:
        text = self.text
        parsed = {"choices": tuple(choice_options(text)), "options": tuple(closed_options(text)),
                  "yes_no": is_yes_no_question(text), "asks_for": asked_kind(text), "names": tuple(named_phrases(text))}
        for name, value in parsed.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "pair", () if self.options else tuple(named_pair(self.names)))
        object.__setattr__(self, "kind", kind_asked(self))

    @classmethod
    def parse(cls, text: str, *, image_text: str = "") -> Question:
        return cls(text, image_text)

    @classmethod
    def of(cls, question: Question | str) -> Question:
        """`question` parsed, when a caller outside the episode gives its text (the Judge's and the
        Manager's callers in training and feedback)."""
        return question if isinstance(question, Question) else cls.parse(question)

    @property
    def closed(self) -> bool:
        """A question answered by a choice among `options`."""
        return bool(self.options)

    @property
    def asks_yes_or_no(self) -> bool:
        """Its allowed answers are yes and no (as `options`; "..., yes or no?" names them too)."""
        return self.options == ("yes", "no")

    @property
    def asks_when(self) -> bool:
        """It asks when ("When ...?", "In which year ...?", "... born in what year?")."""
        return self.asks_for == ("<time>",)

    @property
    def asks_where(self) -> bool:
        return self.asks_for == ("<place>",)
