"""Which of a question's rollouts reports its answer, chosen without the ground truth.

The paper's test-time protocol reports one answer per incoming question before that question's
ground truth scores anything. "memory": the rollout whose plan is most like the plans of past
successful memories (cosine of their embeddings; with no such memory, the majority); "majority": the
answer most rollouts gave (ties: the earliest rollout). Rollouts without an answer are chosen last.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from backend.answer_match import normalize_answer
from backend.plan_selection import most_like_past


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


def select_reported(answers: Sequence[str], plans: Sequence[str], *, how: str, past_plans: Sequence[str] = (),
                    embed: Callable[[list[str]], np.ndarray] | None = None) -> int:
    """The index of the rollout whose answer is reported."""
    if how == "memory" and embed is not None:
        return by_memory(answers, plans, past_plans, embed)
    return by_majority(answers)
