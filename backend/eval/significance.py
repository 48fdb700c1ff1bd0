"""Paired significance of one evaluation against another on the same questions: exact McNemar on the
questions only one of them got right, and a bootstrap interval on the accuracy difference."""

from __future__ import annotations

import random
from dataclasses import dataclass
from math import ceil, comb, sqrt
from statistics import NormalDist

from backend.eval.results import EvalRow


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value: the binomial test of the discordant pairs against 1/2."""
    if only_first < 0 or only_second < 0:
        raise ValueError("counts of discordant pairs cannot be negative")
    n = only_first + only_second
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(min(only_first, only_second) + 1))
    return min(1.0, 2 * tail / 2**n)


def questions_for_power(only_this: int, only_reference: int, questions: int, *, alpha: float = 0.05,
                        power: float = 0.8) -> int | None:
    """How many paired questions a comparison needs for McNemar's test to find, with probability
    `power` at two-sided level `alpha`, a difference as large as the one observed (`only_this` and
    `only_reference` of `questions` right on one side only): Connor's sample size for paired
    proportions (Biometrics 43, 1987). None when this side is not ahead, so no size would show it."""
    if questions <= 0 or only_this <= only_reference:
        return None
    discordant = (only_this + only_reference) / questions
    effect = (only_this - only_reference) / questions
    z_alpha, z_power = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)
    root = z_alpha * sqrt(discordant) + z_power * sqrt(discordant - effect**2)
    return ceil(root**2 / effect**2)


def questions_needed(only_this: int, only_reference: int, questions: int) -> str:
    """questions_for_power as a table's cell: the number, or "none" where this side is not ahead."""
    size = questions_for_power(only_this, only_reference, questions)
    return "none" if size is None else f"{size:,}"


def bootstrap_interval(differences: list[int], *, resamples: int = 10_000, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile interval of the mean of per-question differences (-1, 0, +1), resampling questions."""
    if not differences:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    n = len(differences)
    means = sorted(sum(rng.choices(differences, k=n)) / n for _ in range(resamples))
    cut = (1 - level) / 2
    return means[int(cut * (resamples - 1))], means[int((1 - cut) * (resamples - 1))]


@dataclass(frozen=True)
class PairedComparison:
    questions: int  # answered by both (paired by question id)
    both_right: int
    only_this: int  # right here, wrong in the reference
    only_reference: int
    difference: float  # accuracy here minus the reference's, on the paired questions
    interval: tuple[float, float]  # 95% bootstrap interval of the difference
    p_value: float  # exact McNemar


def paired_comparison(reference: list[EvalRow], rows: list[EvalRow], *, seed: int = 0) -> PairedComparison:
    """`rows` against `reference` on the questions both answered, matched by id."""
    reference_by_id = {r.id: r.correct for r in reference}
    pairs = [(reference_by_id[r.id], r.correct) for r in rows if r.id in reference_by_id]
    differences = [int(mine) - int(theirs) for theirs, mine in pairs]
    only_this = sum(d == 1 for d in differences)
    only_reference = sum(d == -1 for d in differences)
    return PairedComparison(
        questions=len(pairs),
        both_right=sum(theirs and mine for theirs, mine in pairs),
        only_this=only_this,
        only_reference=only_reference,
        difference=sum(differences) / len(pairs) if pairs else float("nan"),
        interval=bootstrap_interval(differences, seed=seed),
        p_value=mcnemar_exact(only_this, only_reference),
    )
