"""Deterministic answer metrics (exact match, token F1) and the statistics the reports use.

Normalisation is the Judge's (SQuAD style) so that every metric sees answers the same way; token
F1 follows the official HotpotQA script, where yes/no answers score only when they match exactly.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

from backend.judge import normalize_answer

_SPECIAL_ANSWERS = ("yes", "no", "noanswer")


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised answers are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall after normalisation (HotpotQA's definition)."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in _SPECIAL_ANSWERS or ref in _SPECIAL_ANSWERS) and pred != ref:
        return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    common = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(pred_tokens)
    recall = common / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between ranks; NaN for no values."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be between 0 and 100, got {q}")
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def running_accuracy(correct: Sequence[bool]) -> list[float]:
    """Accuracy over the first i+1 questions, for every position i of the stream (the learning curve)."""
    curve, hits = [], 0
    for position, ok in enumerate(correct, 1):
        hits += bool(ok)
        curve.append(hits / position)
    return curve


def rolling_accuracy(correct: Sequence[bool], window: int) -> list[float]:
    """Accuracy over each run of `window` consecutive questions (the whole stream when it is shorter),
    ending at each position from the window's end on."""
    window = max(1, min(window, len(correct)))
    return [sum(map(bool, correct[end - window:end])) / window for end in range(window, len(correct) + 1)]
