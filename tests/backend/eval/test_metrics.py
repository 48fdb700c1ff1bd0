"""Metric functions on hand-checked cases."""

from __future__ import annotations

import math

import pytest

from backend.eval.metrics import exact_match, mean, percentile, running_accuracy, token_f1


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("The Eiffel Tower.", "eiffel tower", 1.0),  # case, article and punctuation are normalised away
        ("Tulsa, Oklahoma", "Tulsa", 0.0),
        ("", "Tulsa", 0.0),
        ("yes", "Yes", 1.0),
    ],
)
def test_exact_match(prediction, gold, expected):
    assert exact_match(prediction, gold) == expected


def test_token_f1_partial_overlap():
    # prediction tokens: barack obama was president (4); gold: barack obama (2); common 2
    # precision 2/4, recall 2/2, F1 = 2 * 0.5 * 1 / 1.5
    assert token_f1("Barack Obama was president", "Barack Obama") == pytest.approx(2 / 3)


def test_token_f1_counts_repeated_tokens_once_per_match():
    # prediction: new new york (3), gold: new york (2); common = min counts: new 1 + york 1 = 2
    # precision 2/3, recall 1 -> F1 = 0.8
    assert token_f1("new new york", "New York") == pytest.approx(0.8)


def test_token_f1_yes_no_only_scores_an_exact_match():
    assert token_f1("yes it is", "yes") == 0.0
    assert token_f1("no", "no") == 1.0
    assert token_f1("no", "yes") == 0.0


def test_token_f1_no_overlap_and_empty():
    assert token_f1("Paris", "Tulsa") == 0.0
    assert token_f1("", "Tulsa") == 0.0


def test_percentile_interpolates_between_ranks():
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    values = [float(v) for v in range(1, 21)]
    assert percentile(values, 95) == pytest.approx(19.05)  # rank 19 * 0.95 = 18.05 -> 19 + 0.05
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 20.0
    assert percentile([7.0], 95) == 7.0
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_running_accuracy_and_mean():
    assert running_accuracy([True, False, True, True]) == pytest.approx([1.0, 0.5, 2 / 3, 0.75])
    assert running_accuracy([]) == []
    assert mean([1, 2, 6]) == 3
    assert math.isnan(mean([]))
