"""The Planner: question + contrastive memories -> a research blueprint; reflection -> replan.

The prompts are in backend.prompts.planner. The plan is forced to start as a numbered list (prefill
``1. Search for``) and parsed into steps; the raw text is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from backend.hops import each_of_pair, parse_subquestions, sensible
from backend.llm.base import ChatModel, Completion
from backend.prompts import planner as prompts
from backend.prompts.planner import PLAN_PREFILL, REPLAN_WHEN

if TYPE_CHECKING:
    from backend.question import Question

# A blueprint step is an action. A step that opens with anything else usually states a fact
# (often the guessed answer), which the paper's Planner must never put in a plan.
ACTION_VERBS = frozenset(
    "search find look identify determine check verify confirm compare cross-check combine synthesize "
    "synthesise infer calculate compute count read visit locate list collect gather answer use note "
    "extract retrieve match decide select review establish research".split()
)
_STEP_LINE = re.compile(r"^\s*(?:step\s*)?(\d{1,2})[.):]\s*(.+?)\s*$", re.IGNORECASE)


@dataclass
class Blueprint:
    text: str
    steps: list[str]
    completion: Completion | None = None
    recovered: str | None = None


@dataclass
class Reflection:
    replan: bool
    scores: dict[str, float] = field(default_factory=dict)


def parse_steps(text: str, max_steps: int = 8) -> list[str]:
    """Numbered lines of a plan, in order; repeated or empty steps dropped."""
    steps: list[str] = []
    for line in text.splitlines():
        match = _STEP_LINE.match(line)
        if match:
            step = match.group(2).strip()
            if step and step.lower() not in (s.lower() for s in steps):
                steps.append(step)
        if len(steps) >= max_steps:
            break
    return steps


def split_actions(steps: list[str]) -> tuple[list[str], list[str]]:
    """(action steps, dropped steps that state something instead of doing something)."""
    kept, dropped = [], []
    for step in steps:
        first = re.sub(r"[^a-z-]", "", step.split()[0].lower()) if step.split() else ""
        (kept if first in ACTION_VERBS else dropped).append(step)
    return kept, dropped


def without_claim(step: str, question: str) -> str:
    """A step with what follows its colon removed when that states something the question does not
    ("Synthesize the findings to answer the question: the festival was in Lisbon") — a guessed
    answer in a plan misleads the search. A colon followed by the question's own words stays, and so
    does a search step's query."""
    head, colon, tail = step.partition(":")
    if not colon or not head.strip() or is_search_step(step):
        return step
    known = set(re.findall(r"[a-z0-9]+", question.lower()))
    new = [w for w in re.findall(r"[a-z0-9]+", tail.lower()) if w not in known]
    return head.strip() if len(new) >= 2 else step


def is_search_step(step: str) -> bool:
    return step.lower().startswith(("search", "find", "look", "locate", "retrieve", "research"))


_SEARCH_OPENING = re.compile(
    r"^(?:search|find|look|locate|retrieve|research)(?:\s+(?:up|for|on|about|into|the web for))*"
    r"(?:\s+(?:information|info|details|data|facts|records)(?:\s+(?:on|about|regarding|of))?)?\s+", re.IGNORECASE)

# Where a step says to look ("... in a reliable news source", "... on the internet"): no query's words.
_WHERE_TO_LOOK = re.compile(
    r"\s+(?:in|on|from|using|via|through|across)\s+(?:(?:a|an|the|other|various|multiple|reliable|online|official|"
    r"trusted|credible)\s+)*(?:internet|web|online|news|encyclopedias?|sources?|websites?|databases?|search engines?|"
    r"IMDb|Wikipedia|Google)\b.*$", re.IGNORECASE)


def search_query(step: str) -> str | None:
    """What a search step of a plan asks to look up, as a query ("Search for information on X's
    charges." -> "X's charges"); None for a step that is not a search (an inference, a cross-check, a
    synthesis): its prose is no query."""
    if not is_search_step(step):
        return None
    query = _WHERE_TO_LOOK.sub("", _SEARCH_OPENING.sub("", step.strip(), count=1).rstrip(" ."))
    quoted = re.fullmatch(r'"([^"]{2,80})"', query)
    return (quoted.group(1) if quoted else query) or None


class Planner:
    def __init__(self, model: ChatModel, *, max_new_tokens: int = 160) -> None:
        self.model = model
        self.max_new_tokens = max_new_tokens

    def plan(self, question: str, memories_text: str, tools_text: str, caption: str | None = None,
             temperature: float = 0.0) -> Blueprint:
        messages = prompts.plan_messages(question, memories_text, tools_text, caption)
        completion = self.model.generate(messages, max_new_tokens=self.max_new_tokens, prefill=PLAN_PREFILL,
                                         temperature=temperature)
        text = PLAN_PREFILL + completion.text
        return self._blueprint(text, completion, parse_steps(text),
                               fallback=prompts.FALLBACK_PLAN_STEP.format(question=question), question=question)

    @staticmethod
    def _blueprint(text: str, completion: Completion, steps: list[str], *, fallback: str, question: str = "") -> Blueprint:
        """Keep the action steps, without claims after a colon; say visibly what was dropped or cut."""
        kept, dropped = split_actions(steps)
        notes = []
        if dropped:
            notes.append(f"dropped {len(dropped)} step(s) that stated facts instead of actions")
        cut = [without_claim(step, question) for step in kept]
        if cut != kept:
            notes.append(f"cut the claim from {sum(a != b for a, b in zip(cut, kept))} step(s)")
            kept = list(dict.fromkeys(cut))
        if not kept:
            kept = [fallback]
            notes.append("no action step was left; using a single search step")
        return Blueprint(text=text.strip(), steps=kept, completion=completion, recovered="; ".join(notes) or None)

    def decompose(self, question: Question, worked_text: str = "", caption: str | None = None,
                  temperature: float = 0.0, unstated: str | None = None) -> Blueprint:
        """A plan of sub-questions (backend.hops) after `worked_text`'s examples from memory; the question
        itself as the one sub-question when the model's text gives none. `unstated`: the answer the
        question researched as one hop found, which no retrieved text states (a reflection asking for hops)."""
        messages = prompts.decompose_messages(question.text, worked_text, caption, unstated)
        completion = self.model.generate(messages, max_new_tokens=self.max_new_tokens, prefill=prompts.DECOMPOSE_PREFILL,
                                         stop=("\n\n", "Question:"), temperature=temperature)
        text = prompts.DECOMPOSE_PREFILL + completion.text
        subquestions, recovered = sensible(parse_subquestions(text), question)
        if not subquestions:
            note = "no sub-question could be read; researching the question as one hop"
            subquestions, recovered = [question.text], f"{recovered}; {note}" if recovered else note
        if subquestions == [question.text] and (each := each_of_pair(question)):
            note = "but a yes/no question about two things is asked of each instead"
            subquestions, recovered = each, f"{recovered}; {note}" if recovered else note
        return Blueprint(text=text.strip(), steps=subquestions, completion=completion, recovered=recovered)

    def reflect(self, question: str, answer: str, trace_text: str, support: str | None = None) -> Reflection:
        """`support`: where the retrieved text states the answer ("" = nowhere; None = not checked, as
        for a yes/no question), so the decision rests on evidence rather than on the search titles."""
        choice = self.model.choose(prompts.reflect_messages(question, answer, trace_text, support),
                                   list(prompts.REFLECT_OPTIONS))
        return Reflection(replan=choice.label == REPLAN_WHEN, scores=dict(choice.logprobs))

    def replan(self, question: str, answer: str, trace_text: str, steps_done: list[str]) -> Blueprint:
        messages = prompts.replan_messages(question, answer, trace_text, steps_done)
        completion = self.model.generate(messages, max_new_tokens=self.max_new_tokens, prefill=PLAN_PREFILL)
        text = PLAN_PREFILL + completion.text
        words = text.split()
        if len(words) > 200:  # the paper caps supplementary plans at 200 words
            text = " ".join(words[:200])
        return self._blueprint(text, completion, parse_steps(text, max_steps=3),
                               fallback=prompts.FALLBACK_REPLAN_STEP.format(question=question), question=question)
