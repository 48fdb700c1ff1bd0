"""Paired significance: exact McNemar on the discordant questions and a bootstrap interval of the
accuracy difference, checked against values worked out by hand."""

from __future__ import annotations

import random

import pytest

from backend.eval.results import EvalRow
from backend.eval.significance import bootstrap_interval, mcnemar_exact, paired_comparison, questions_for_power


def row(qid: str, correct: bool) -> EvalRow:
    return EvalRow(index=0, id=qid, question="q", gold="g", answer="a", verdict="correct" if correct else "incorrect",
                   judge_method="", correct=correct, em=0.0, f1=0.0, llm_calls=0, prompt_tokens=0,
                   completion_tokens=0, tool_calls=0, wall_seconds=0, llm_seconds=0, tool_seconds=0,
                   other_seconds=0, harness_seconds=0, memories_used=0)


def test_exact_mcnemar_is_the_two_sided_binomial_test_of_the_discordant_pairs():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)  # 2 * 0.5**5
    assert mcnemar_exact(0, 5) == mcnemar_exact(5, 0)
    assert mcnemar_exact(1, 9) == pytest.approx(2 * (1 + 10) / 1024)
    assert mcnemar_exact(3, 2) == 1.0  # capped: a two-sided p is never above 1
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_the_bootstrap_interval_covers_the_difference_and_narrows_with_agreement():
    assert bootstrap_interval([1] * 30) == (1.0, 1.0)
    mixed = [1] * 12 + [-1] * 4 + [0] * 84  # +8 points on 100 questions
    low, high = bootstrap_interval(mixed)
    assert low < 0.08 < high and -0.05 < low and high < 0.2
    assert bootstrap_interval(mixed, seed=0) == (low, high)  # seeded: a report is reproducible
    wider = bootstrap_interval([1] * 12 + [-1] * 4 + [0] * 4)  # the same discordant pairs on 20 questions
    assert wider[1] - wider[0] > high - low


def test_paired_comparison_matches_questions_by_id_and_ignores_unpaired_ones():
    reference = [row("a", True), row("b", False), row("c", False), row("d", True), row("x", True)]
    method = [row("d", False), row("c", True), row("b", True), row("a", True), row("y", False)]
    c = paired_comparison(reference, method)
    assert (c.questions, c.both_right, c.only_this, c.only_reference) == (4, 1, 2, 1)
    assert c.difference == pytest.approx(0.25)
    assert c.p_value == 1.0
    assert c.interval[0] <= 0.25 <= c.interval[1]


def _simulated_power(only_this: int, only_reference: int, questions: int, stream: int, runs: int = 400) -> float:
    """How often exact McNemar finds p < 0.05 on `stream` questions drawn with the observed proportions."""
    rng = random.Random(0)
    found = 0
    for _ in range(runs):
        draws = [rng.random() for _ in range(stream)]
        this = sum(u < only_this / questions for u in draws)
        reference = sum(only_this / questions <= u < (only_this + only_reference) / questions for u in draws)
        found += mcnemar_exact(this, reference) < 0.05
    return found / runs


def test_questions_for_power_is_connors_paired_sample_size_and_holds_in_simulation():
    assert questions_for_power(10, 5, 100) == 469  # worked by hand: (1.960 * 0.387 + 0.842 * 0.384)^2 / 0.05^2
    assert questions_for_power(12, 4, 100) == 194
    assert questions_for_power(5, 5, 100) is None and questions_for_power(2, 6, 100) is None  # not ahead
    assert questions_for_power(1, 0, 0) is None
    needed = questions_for_power(12, 4, 100)
    assert 0.7 < _simulated_power(12, 4, 100, needed) < 0.9
    assert _simulated_power(12, 4, 100, needed // 3) < 0.5
