"""A plan the person reviews before it runs: the Planner's draft shown as numbered lines, edited (reworded,
added to, cut, reordered), checked, and then researched exactly as written, as the person's plan.

The same text format serves the web page's editor and `python -m app ask --review-plan`: one step a line,
an optional "1." in front (the line's place is its number, whatever it says), "#1", "#2" standing for the
answers of the sub-questions before it (backend.hops), lines opening with "# " left out as comments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from backend.inputs import InputError, without_control_characters

PERSON = "person"  # PlanReady.source and the memory's plan_source for a plan the person reviewed
MAX_PERSON_STEPS = 6  # a plan of sub-questions refers to earlier answers as #1..#9; six hops is already long
_NUMBERED = re.compile(r"^\s*(?:step\s*|q(?:uestion)?\s*)?\d{1,2}\s*[.):]\s+", re.IGNORECASE)
_REFERENCE = re.compile(r"#(\d+)")
_COMMENT = re.compile(r"^\s*#(?:\s|$)")


class PlanError(InputError):
    """The edited plan cannot be researched; the message says what to change."""


@dataclass
class PlanDraft:
    """The Planner's plan for a question, before it runs: its steps and how the Planner's text was read."""

    question: str
    steps: list[str]
    shape: str  # "subquestions" | "steps" (agent.plan_shape)
    note: str | None = None  # what the Planner's text needed (backend.planner.Blueprint.recovered)
    planner_model: str = ""
    memories: list[str] = field(default_factory=list)  # the questions of the memories it was shown

    @property
    def text(self) -> str:
        return plan_text(self.steps)


def plan_text(steps: list[str]) -> str:
    return "\n".join(f"{number}. {step}" for number, step in enumerate(steps, 1))


def parse_plan_text(text: str) -> list[str]:
    """The steps of an edited plan, in the order of its lines: numbering taken off, blank lines and
    "# " comments left out."""
    steps = []
    for line in without_control_characters(text or "").splitlines():
        if not line.strip() or _COMMENT.match(line):
            continue
        step = " ".join(_NUMBERED.sub("", line, count=1).split())
        if step:
            steps.append(step)
    return steps


def checked_plan(steps: list[str], shape: str, max_chars: int) -> list[str]:
    """The person's plan as it will be researched, or PlanError saying what to change: at least one
    step, at most MAX_PERSON_STEPS, none too long, and in a plan of sub-questions every #n naming a
    sub-question before its own."""
    steps = [" ".join(without_control_characters(step).split()) for step in steps]
    steps = [step for step in steps if step]
    noun = "sub-question" if shape == "subquestions" else "step"
    if not steps:
        raise PlanError(f"The plan is empty: write at least one {noun}, one a line, or research without reviewing the plan.")
    if len(steps) > MAX_PERSON_STEPS:
        raise PlanError(f"The plan has {len(steps)} {noun}s; the limit is {MAX_PERSON_STEPS}. Merge or remove some.")
    for number, step in enumerate(steps, 1):
        if len(step) > max_chars:
            raise PlanError(f"{noun.capitalize()} {number} is {len(step):,} characters long; the limit is "
                            f"{max_chars:,}. Shorten it to what it asks.")
        if shape != "subquestions":
            continue
        for reference in map(int, _REFERENCE.findall(step)):
            if reference == number:
                raise PlanError(f"Sub-question {number} refers to its own answer (#{reference}): refer only to "
                                "the answers of the sub-questions above it.")
            if reference > len(steps) or reference == 0:
                raise PlanError(f"Sub-question {number} refers to #{reference}, but the plan has {len(steps)} "
                                f"sub-question{'s' if len(steps) != 1 else ''}: refer to one above it, as #1 for the first.")
            if reference > number:
                raise PlanError(f"Sub-question {number} refers to #{reference}, which comes after it: a sub-question "
                                f"can use only the answers of the ones above it. Move sub-question {reference} up, "
                                "or change the reference.")
    return steps
