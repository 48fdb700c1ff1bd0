"""Which of a question's rollouts reports its answer, chosen without the ground truth.

The paper's test-time protocol reports one answer per incoming question before that question's
ground truth scores anything. "memory": the rollout whose plan is most like the plans of past
successful memories (cosine of their embeddings; with no such memory, the majority); "majority": the
answer most rollouts gave (ties: the earliest rollout); "reader": the Executor's reader chooses
among the distinct answers, reading every rollout's passages together (backend.reader.
choose_among_answers). Rollouts without an answer are chosen last.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from backend.answer_match import normalize_answer
from backend.config import SELECTIONS
from backend.llm.base import ChatModel
from backend.plan_selection import most_like_past
from backend.reader import choose_among_answers


@dataclass
class Rollouts:
    """What selection sees of one question's rollouts: each one's answer, plan and retrieved passages."""

    question: str
    answers: list[str]
    plans: list[str]
    passages: list[list[dict]] = field(default_factory=list)


def by_majority(answers: Sequence[str]) -> int:
    keys = [normalize_answer(answer) for answer in answers]
    counts = Counter(key for key in keys if key)
    if not counts:
        return 0
    best = max(counts.values())
    return next(i for i, key in enumerate(keys) if key and counts[key] == best)


def by_memory(answers: Sequence[str], plans: Sequence[str], past_plans: Sequence[str],
              embed: Callable[[list[str]], np.ndarray]) -> int:
    """The answered rollout whose plan is nearest to any past successful plan; the majority without any."""
    answered = [i for i, answer in enumerate(answers) if normalize_answer(answer)]
    nearest = most_like_past([plans[i] for i in answered], past_plans, embed)
    return by_majority(answers) if nearest is None else answered[nearest[0]]


def by_reader(rollouts: Rollouts, reader: ChatModel) -> int:
    """The first rollout giving the answer the reader chooses among the distinct ones, from every
    rollout's passages; the majority when the rollouts agree (no model call)."""
    first_of: dict[str, int] = {}
    for i, answer in enumerate(rollouts.answers):
        key = normalize_answer(answer)
        if key and key not in first_of:
            first_of[key] = i
    if len(first_of) < 2:
        return by_majority(rollouts.answers)
    indices = list(first_of.values())
    candidates = [rollouts.answers[i].strip() for i in indices]
    pooled = [passage for passages in rollouts.passages for passage in passages]
    choice = choose_among_answers(reader, rollouts.question, candidates, pooled)
    return indices[candidates.index(choice.label)]


def select_reported(rollouts: Rollouts, *, how: str, past_plans: Sequence[str] = (),
                    embed: Callable[[list[str]], np.ndarray] | None = None, reader: ChatModel | None = None) -> int:
    """The index of the rollout whose answer is reported (`how`: one of backend.config.SELECTIONS);
    the majority where what `how` needs is missing."""
    if how not in SELECTIONS:
        raise ValueError(f"selection {how!r} is none of {', '.join(SELECTIONS)}")
    if how == "memory" and embed is not None:
        return by_memory(rollouts.answers, rollouts.plans, past_plans, embed)
    if how == "reader" and reader is not None:
        return by_reader(rollouts, reader)
    return by_majority(rollouts.answers)
