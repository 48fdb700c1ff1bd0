"""Which of a question's rollouts reports its answer, chosen without the ground truth.

The paper's test-time protocol reports one answer per incoming question before that question's
ground truth scores anything. "memory": the rollout whose plan is most like the plans of past
successful memories (cosine of their embeddings; with no such memory, the majority); "majority": the
answer most rollouts gave (ties: the earliest rollout); "reader": the Executor's reader chooses
among the distinct answers, reading every rollout's passages together (backend.reader.chosen_run).
Rollouts without an answer are chosen last.
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
from backend.reader import chosen_run


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
    rollout's passages (backend.reader.chosen_run); the majority when the rollouts agree (no model call)."""
    chosen = chosen_run(reader, rollouts.question, rollouts.answers, rollouts.passages)
    return by_majority(rollouts.answers) if chosen is None else chosen


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
