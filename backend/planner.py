"""The Planner: question + contrastive memories -> a research blueprint; reflection -> replan.

Prompts are short on purpose: the embedded model is tiny and loses long formats. The plan is
forced to start as a numbered list (prefill ``1.``) and parsed into steps; the raw text is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from backend import protocol
from backend.llm.base import ChatModel, Completion

PLANNER_SYSTEM = (
    "You are a research planner. Write a short numbered plan of 2 to 5 atomic steps "
    "(a search and what it is for, an inference, a cross-check, a synthesis) that an assistant "
    "with the listed tools can follow to answer the question. Never state facts or the answer."
)

REPLAN_SYSTEM = (
    "You are a research planner reviewing an assistant's work. Write a short numbered "
    "supplementary plan (at most 3 steps) that fixes what is missing. Never state the answer."
)

REFLECT_QUESTION = (
    "Does the research so far support this answer well enough to trust it? "
    "Say no if evidence is missing or the answer is incomplete. Reply yes or no."
)
# Asked this way round, a model's leaning towards "yes" keeps a supported answer instead of paying for
# a second round of research (measured on `train`: asked "is more research needed?", Qwen-1.5B said
# yes after answers the results stated).
REPLAN_WHEN = "no"

# A blueprint step is an action. A step that opens with anything else usually states a fact
# (often the guessed answer), which the paper's Planner must never put in a plan.
ACTION_VERBS = frozenset(
    "search find look identify determine check verify confirm compare cross-check combine synthesize "
    "synthesise infer calculate compute count read visit locate list collect gather answer use note "
    "extract retrieve match decide select review establish research".split()
)
PLAN_PREFILL = "1. Search for"
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


def format_memories(successful: list[dict], failed: list[dict], max_chars: int = 400) -> str:
    """Contrastive memories as prompt text: strategies that worked, then lessons from failures."""

    def block(title: str, items: list[dict]) -> str:
        if not items:
            return f"{title}: none found."
        lines = [f"{title}:"]
        for i, item in enumerate(items, 1):
            verdict = "correct" if item.get("correct") else "incorrect"
            if not item.get("verified", True):
                verdict += ", unverified"
            summary = (item.get("summary") or "")[:max_chars]
            caption = f" Image: {item['caption']}." if item.get("caption") else ""
            lines.append(f"{i}. ({verdict}) Q: {item.get('question', '')}{caption} How: {summary}")
        return "\n".join(lines)

    return block("Successful strategies", successful) + "\n" + block("Failure lessons", failed)


def format_cases(cases: list[dict], max_chars: int = 300) -> str:
    """Past cases as the memento baseline shows them to the Planner: each earlier question with the
    plan that was followed and whether its answer was right (plans, not workflow summaries)."""
    if not cases:
        return "Past cases: none found."
    lines = ["Past cases (question, plan followed, outcome):"]
    for i, case in enumerate(cases, 1):
        outcome = "right answer" if case.get("correct") else "wrong answer"
        plan = " ".join((case.get("plan") or "").split())[:max_chars]
        lines.append(f"{i}. Q: {case.get('question', '')} Plan: {plan or '(none)'} Outcome: {outcome}")
    return "\n".join(lines)


class Planner:
    def __init__(self, model: ChatModel, *, max_new_tokens: int = 160) -> None:
        self.model = model
        self.max_new_tokens = max_new_tokens

    def plan(self, question: str, memories_text: str, tools_text: str, caption: str | None = None) -> Blueprint:
        image_line = f"\nImage: {caption}" if caption else ""
        messages = [
            {"role": "system", "content": PLANNER_SYSTEM},
            {
                "role": "user",
                "content": f"Tools: {tools_text}\n\n{memories_text}\n\nQuestion: {question}{image_line}\n\nPlan:",
            },
        ]
        completion = self.model.generate(messages, max_new_tokens=self.max_new_tokens, prefill=PLAN_PREFILL)
        text = PLAN_PREFILL + completion.text
        return self._blueprint(text, completion, parse_steps(text), fallback=f"Search for the main entities of: {question}",
                               question=question)

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

    def reflect(self, question: str, answer: str, trace_text: str, support: str | None = None) -> Reflection:
        """`support`: where the retrieved text states the answer ("" = nowhere; None = not checked, as
        for a yes/no question), so the decision rests on evidence rather than on the search titles."""
        if support is None:
            evidence = ""
        elif support:
            evidence = f"\nWhere the results state it (retrieved data): {protocol.neutralise(support)}"
        else:
            evidence = "\nThe retrieved text does not state this answer."
        messages = [
            {"role": "system", "content": "You check research work."},
            {
                "role": "user",
                "content": f"Question: {question}\nResearch so far:\n{trace_text}\nAnswer: {answer or '(none)'}"
                           f"{evidence}\n\n{REFLECT_QUESTION}",
            },
        ]
        choice = self.model.choose(messages, ["yes", "no"])
        return Reflection(replan=choice.label == REPLAN_WHEN, scores=dict(choice.logprobs))

    def replan(self, question: str, answer: str, trace_text: str, steps_done: list[str]) -> Blueprint:
        done = "\n".join(f"- {s}" for s in steps_done) or "- (nothing)"
        messages = [
            {"role": "system", "content": REPLAN_SYSTEM},
            {
                "role": "user",
                "content": (
                    f"Question: {question}\nSteps already done:\n{done}\nFindings:\n{trace_text}\n"
                    f"Current answer: {answer or '(none)'}\n\nSupplementary plan:"
                ),
            },
        ]
        completion = self.model.generate(messages, max_new_tokens=self.max_new_tokens, prefill=PLAN_PREFILL)
        text = PLAN_PREFILL + completion.text
        words = text.split()
        if len(words) > 200:  # the paper caps supplementary plans at 200 words
            text = " ".join(words[:200])
        return self._blueprint(
            text, completion, parse_steps(text, max_steps=3), fallback=f"Search again with different keywords for: {question}",
            question=question,
        )
