"""Choosing among several plans: the plan most like the plans of past successful memories (the MIA
paper's `batch_evaluate`); test-time learning's stream chooses among rollouts this way."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

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

