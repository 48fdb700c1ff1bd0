"""Choosing among several plans before any is followed: the plan most like the plans of past
successful memories (the MIA paper's `batch_evaluate`). The app writes several plans when
`agent.plan_candidates` > 1; test-time learning's stream chooses among rollouts the same way."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

# How varied the extra plans are; the first plan is always the greedy one.
PLAN_SAMPLE_TEMPERATURE = 0.8


def most_like_past(plans: Sequence[str], past_plans: Sequence[str],
                   embed: Callable[[list[str]], np.ndarray]) -> tuple[int, float] | None:
    """The index of the plan nearest (cosine) to any past plan, with that similarity; None when there
    is no plan or no past plan to compare with."""
    past = [plan for plan in past_plans if plan.strip()]
    if not plans or not past:
        return None
    vectors = np.asarray(embed(list(plans) + past), dtype=np.float64)
    vectors = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
    similarity = (vectors[: len(plans)] @ vectors[len(plans):].T).max(axis=1)
    best = int(np.argmax(similarity))
    return best, float(similarity[best])


def numbered(steps: Sequence[str]) -> str:
    """A plan's steps as a memory stores them ("1. …\\n2. …"), so that candidates and past plans compare alike."""
    return "\n".join(f"{number}. {step}" for number, step in enumerate(steps, 1))
