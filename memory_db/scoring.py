"""Contrastive retrieval scoring (MIA): score = 0.7 * minmax(similarity) + 0.3 * win rate.

Min-max runs over the whole bucket, then the best `k` correct memories ("successful
strategies") and the best `k` incorrect ones ("failure lessons") are taken separately.
The weights are the paper's by default; a search takes others as keyword parameters
(the app's `[memory]` similarity_weight, win_rate_weight and caption_weight).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SIMILARITY_WEIGHT = 0.7
WIN_RATE_WEIGHT = 0.3
QUESTION_WEIGHT = 0.8  # similarity = 0.8 * cos(question) + 0.2 * cos(caption) with a caption
CAPTION_WEIGHT = 0.2


@dataclass(frozen=True)
class Ranked:
    row_id: int
    similarity: float
    score: float


def minmax(similarity: np.ndarray, low: float | None = None, high: float | None = None) -> np.ndarray:
    """Scale into [0, 1]; all-equal similarities (e.g. a single memory) map to 1."""
    low = float(similarity.min()) if low is None else low
    high = float(similarity.max()) if high is None else high
    if high - low <= 1e-12:
        return np.ones_like(similarity, dtype=np.float64)
    return (similarity.astype(np.float64) - low) / (high - low)


def contrastive_scores(similarity: np.ndarray, usage: np.ndarray, success: np.ndarray,
                       low: float | None = None, high: float | None = None, *,
                       similarity_weight: float = SIMILARITY_WEIGHT,
                       win_rate_weight: float = WIN_RATE_WEIGHT) -> np.ndarray:
    win_rate = success / np.maximum(usage, 1)
    return similarity_weight * minmax(similarity, low, high) + win_rate_weight * win_rate


def top_positions(score: np.ndarray, similarity: np.ndarray, row_ids: np.ndarray,
                  candidates: np.ndarray, count: int) -> np.ndarray:
    """The `count` best of `candidates`: higher score, then higher similarity, then older row."""
    if count <= 0 or len(candidates) == 0:
        return candidates[:0]
    if len(candidates) > count:
        cut = np.argpartition(-score[candidates], count - 1)[:count]
        threshold = score[candidates[cut]].min()
        candidates = candidates[score[candidates] >= threshold]  # keep ties for a stable order
    order = np.lexsort((row_ids[candidates], -similarity[candidates], -score[candidates]))
    return candidates[order][:count]


def rank_contrastive(*, row_ids: np.ndarray, similarity: np.ndarray, correct: np.ndarray,
                     usage: np.ndarray, success: np.ndarray, k: int, offset: int,
                     low: float | None = None, high: float | None = None, min_similarity: float | None = None,
                     similarity_weight: float = SIMILARITY_WEIGHT, win_rate_weight: float = WIN_RATE_WEIGHT,
                     ) -> tuple[list[Ranked], list[Ranked]]:
    """`min_similarity`: a relevance floor; a memory less similar than it is never returned."""
    if len(row_ids) == 0:
        return [], []
    score = contrastive_scores(similarity, usage, success, low, high,
                               similarity_weight=similarity_weight, win_rate_weight=win_rate_weight)
    result = []
    for label in (True, False):
        relevant = correct == label
        if min_similarity is not None:
            relevant &= similarity >= min_similarity
        candidates = np.flatnonzero(relevant)
        best = top_positions(score, similarity, row_ids, candidates, offset + k)[offset:]
        result.append([Ranked(int(row_ids[i]), float(similarity[i]), float(score[i])) for i in best])
    return result[0], result[1]
