"""In-process vector index of one namespace, split into buckets by modality.

Each bucket keeps, per memory, its question (and caption) vector and the counters that
scoring needs, in numpy arrays aligned by position and sorted by database row id. The store
updates it right after each committed write, so it always matches the database.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .approximate import InvertedFileIndex, faiss_available, list_count_for
from .records import QUESTION_TYPES
from .scoring import CAPTION_WEIGHT, QUESTION_WEIGHT, SIMILARITY_WEIGHT, WIN_RATE_WEIGHT, Ranked, rank_contrastive

QUESTION_TYPE_CODES = {name: code for code, name in enumerate(QUESTION_TYPES)}


def dot_rows(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """matrix @ vector without BLAS: as fast as one BLAS thread, and no BLAS worker threads
    spinning against other work on a small, busy machine (measured: 6x less CPU per query)."""
    return np.einsum("ij,j->i", matrix, vector)
MIN_SAMPLE_SIZE = 2048
NEAREST_PROBES = 4


@dataclass
class IndexEntry:
    """One memory as the index sees it."""

    row_id: int
    question_vector: np.ndarray
    caption_vector: np.ndarray | None
    correct: bool
    usage_count: int
    success_count: int
    question_type: str


@dataclass
class IndexSettings:
    approximate_threshold: int = 50_000  # buckets larger than this use the inverted file
    # inverted lists scanned per query; MIA's score lets a high win rate lift a memory of middling
    # similarity, so fairly many lists are needed (recall@4 vs exact: 16 -> 0.92, 32 -> 0.96 at 100k)
    n_probe: int = 32
    candidates: int = 512  # ANN candidates rescored per query (grown when labels are scarce)
    # PostgreSQL with pgvector (memory_db.database_search): search in SQL with the HNSW index
    # instead of loading each namespace into this process (False: in process, as on SQLite)
    database_search: bool = True
    # there, a bucket the HNSW candidates do not cover and smaller than this is scored exactly in SQL
    exact_limit: int = 10_000


class BucketIndex:
    """Vectors and counters of one (namespace, modality) bucket."""

    def __init__(self, dim: int, with_captions: bool, settings: IndexSettings):
        self.dim = dim
        self.with_captions = with_captions
        self.settings = settings
        self.n = 0  # used positions (alive or not)
        self.live = 0
        self._capacity = 0
        self.row_ids = np.empty(0, np.int64)
        self.alive = np.empty(0, bool)
        self.correct = np.empty(0, bool)
        self.usage = np.empty(0, np.int64)
        self.success = np.empty(0, np.int64)
        self.qtype = np.empty(0, np.int8)
        self.questions: np.ndarray | None = np.empty((0, dim), np.float32)
        self.captions: np.ndarray | None = np.empty((0, dim), np.float32) if with_captions else None
        self.ann: InvertedFileIndex | None = None
        self._min_sample: np.ndarray | None = None  # question vectors for the min-similarity estimate

    # ---- storage -------------------------------------------------------------------------
    def _reserve(self, needed: int) -> None:
        if needed <= self._capacity:
            return
        capacity = max(needed, 2 * self._capacity, 64)

        def grown(array: np.ndarray) -> np.ndarray:
            out = np.zeros((capacity,) + array.shape[1:], array.dtype)
            out[: self.n] = array[: self.n]
            return out

        self.row_ids, self.alive, self.correct = grown(self.row_ids), grown(self.alive), grown(self.correct)
        self.usage, self.success, self.qtype = grown(self.usage), grown(self.success), grown(self.qtype)
        if self.questions is not None:
            self.questions = grown(self.questions)
        if self.captions is not None:
            self.captions = grown(self.captions)
        self._capacity = capacity

    def add_many(
        self, row_ids: np.ndarray, questions: np.ndarray, captions: np.ndarray | None,
        correct: np.ndarray, usage: np.ndarray, success: np.ndarray, qtypes: np.ndarray,
    ) -> None:
        """Append memories whose row ids are all larger than any already held."""
        count = len(row_ids)
        if count == 0:
            return
        if self.n and row_ids[0] <= self.row_ids[self.n - 1]:
            raise ValueError("row ids must grow; rebuild the index instead")
        self._reserve(self.n + count)
        window = slice(self.n, self.n + count)
        self.row_ids[window] = row_ids
        self.alive[window] = True
        self.correct[window] = correct
        self.usage[window] = usage
        self.success[window] = success
        self.qtype[window] = qtypes
        if self.captions is not None:
            self.captions[window] = captions if captions is not None else 0.0
        if self.ann is not None:
            self.ann.add(questions, row_ids)
        else:
            self.questions[window] = questions
        self.n += count
        self.live += count
        if self.ann is None and self.live > self.settings.approximate_threshold and faiss_available():
            self._build_approximate()

    def add(self, entry: IndexEntry) -> None:
        self.add_many(
            np.array([entry.row_id], np.int64), entry.question_vector.reshape(1, -1),
            None if entry.caption_vector is None else entry.caption_vector.reshape(1, -1),
            np.array([entry.correct]), np.array([entry.usage_count]), np.array([entry.success_count]),
            np.array([QUESTION_TYPE_CODES[entry.question_type]], np.int8),
        )

    def position(self, row_id: int) -> int | None:
        pos = int(np.searchsorted(self.row_ids[: self.n], row_id))
        if pos < self.n and self.row_ids[pos] == row_id and self.alive[pos]:
            return pos
        return None

    def update(self, row_id: int, *, correct: bool | None = None, usage: int | None = None,
               success: int | None = None, question_type: str | None = None) -> None:
        pos = self.position(row_id)
        if pos is None:
            raise KeyError(row_id)
        if correct is not None:
            self.correct[pos] = correct
        if usage is not None:
            self.usage[pos] = usage
        if success is not None:
            self.success[pos] = success
        if question_type is not None:
            self.qtype[pos] = QUESTION_TYPE_CODES[question_type]

    def set_vectors(self, row_id: int, question_vector: np.ndarray, caption_vector: np.ndarray | None) -> None:
        pos = self.position(row_id)
        if pos is None:
            raise KeyError(row_id)
        if self.captions is not None:
            self.captions[pos] = caption_vector if caption_vector is not None else 0.0
        if self.ann is not None:
            ids = np.array([row_id], np.int64)
            self.ann.remove(ids)
            self.ann.add(question_vector.reshape(1, -1), ids)
        else:
            self.questions[pos] = question_vector

    def nearest(self, question_vector: np.ndarray, caption_vector: np.ndarray | None,
                correct: bool | None = None) -> tuple[int, float] | None:
        """The most similar live memory (row id, similarity), optionally among one label only; None when there is none."""
        if self.live == 0:
            return None
        use_caption = caption_vector is not None and self.captions is not None
        if self.ann is None:
            wanted = self.alive[: self.n] if correct is None else self.alive[: self.n] & (self.correct[: self.n] == correct)
            positions = np.flatnonzero(wanted)
            if positions.size == 0:
                return None
            sims = self._similarity_all(question_vector, caption_vector if use_caption else None)[positions]
        else:
            # a near-duplicate sits in the closest few lists; no need to scan as many as a query does
            sims, row_ids = self.ann.search(question_vector, 4, n_probe=NEAREST_PROBES)
            positions = np.searchsorted(self.row_ids[: self.n], row_ids)
            if use_caption:
                sims = QUESTION_WEIGHT * sims + CAPTION_WEIGHT * dot_rows(self.captions[positions], caption_vector)
            if correct is not None:
                keep = self.correct[positions] == correct
                positions, sims = positions[keep], sims[keep]
                if positions.size == 0:
                    return None
        best = int(np.argmax(sims))
        return int(self.row_ids[positions[best]]), float(sims[best])

    def remove(self, row_id: int) -> None:
        pos = self.position(row_id)
        if pos is None:
            raise KeyError(row_id)
        self.alive[pos] = False
        self.live -= 1
        if self.ann is not None:
            self.ann.remove(np.array([row_id], np.int64))
        if self.n - self.live > max(1024, self.live):
            self._compact()

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive[: self.n])
        self.row_ids, self.alive = self.row_ids[keep], self.alive[keep]
        self.correct, self.usage, self.success = self.correct[keep], self.usage[keep], self.success[keep]
        self.qtype = self.qtype[keep]
        if self.questions is not None:
            self.questions = self.questions[keep]
        if self.captions is not None:
            self.captions = self.captions[keep]
        self.n = self._capacity = len(keep)

    def _build_approximate(self) -> None:
        live = np.flatnonzero(self.alive[: self.n])
        vectors = self.questions[live]
        ann = InvertedFileIndex(self.dim, list_count_for(len(live)), self.settings.n_probe)
        rng = np.random.default_rng(0)
        sample = rng.choice(len(live), size=min(len(live), ann.training_size()), replace=False)
        ann.train(vectors[sample])
        ann.add(vectors, self.row_ids[live])
        self._min_sample = vectors[sample[:MIN_SAMPLE_SIZE]].copy()
        self.ann = ann
        self.questions = None  # the inverted file now holds the only copy

    def start_approximate(self, expected_size: int, sample: np.ndarray) -> None:
        """Switch an empty bucket to an inverted file trained on `sample`, for bulk loading."""
        if self.n:
            raise ValueError("start_approximate needs an empty bucket")
        ann = InvertedFileIndex(self.dim, list_count_for(expected_size), self.settings.n_probe)
        rng = np.random.default_rng(0)
        chosen = rng.choice(len(sample), size=min(len(sample), ann.training_size()), replace=False)
        ann.train(sample[chosen])
        self._min_sample = sample[chosen[:MIN_SAMPLE_SIZE]].copy()
        self.ann = ann
        self.questions = None

    # ---- search --------------------------------------------------------------------------
    def search(
        self, question_vector: np.ndarray, caption_vector: np.ndarray | None, *,
        k: int, offset: int, question_type: str | None, min_similarity: float | None = None,
        similarity_weight: float = SIMILARITY_WEIGHT, win_rate_weight: float = WIN_RATE_WEIGHT,
        caption_weight: float = CAPTION_WEIGHT,
    ) -> tuple[list[Ranked], list[Ranked]]:
        if self.live == 0:
            return [], []
        use_caption = caption_vector is not None and self.captions is not None
        if self.ann is None:
            # a product over the contiguous block, then a selection: far cheaper than gathering rows
            similarity = self._similarity_all(question_vector, caption_vector if use_caption else None, caption_weight)
            positions = np.flatnonzero(self.alive[: self.n])
            if question_type is not None:
                positions = positions[self.qtype[positions] == QUESTION_TYPE_CODES[question_type]]
            similarity = similarity[positions]
            low = high = None
        else:
            positions, similarity, low = self._approximate_candidates(
                question_vector, caption_vector if use_caption else None, k + offset, question_type, caption_weight
            )
            high = None
        return rank_contrastive(
            row_ids=self.row_ids[positions], similarity=similarity,
            correct=self.correct[positions], usage=self.usage[positions],
            success=self.success[positions], k=k, offset=offset, low=low, high=high,
            min_similarity=min_similarity, similarity_weight=similarity_weight, win_rate_weight=win_rate_weight,
        )

    def _similarity_all(self, question_vector: np.ndarray, caption_vector: np.ndarray | None,
                        caption_weight: float = CAPTION_WEIGHT) -> np.ndarray:
        similarity = dot_rows(self.questions[: self.n], question_vector)
        if caption_vector is not None:
            caption_similarity = dot_rows(self.captions[: self.n], caption_vector)
            similarity = (1.0 - caption_weight) * similarity + caption_weight * caption_similarity
        return similarity

    def _approximate_candidates(self, question_vector, caption_vector, needed, question_type,
                                caption_weight: float = CAPTION_WEIGHT):
        n_candidates = max(self.settings.candidates, 32 * needed)
        while True:
            sims, row_ids = self.ann.search(question_vector, min(n_candidates, self.live))
            positions = np.searchsorted(self.row_ids[: self.n], row_ids)
            keep = np.ones(len(positions), bool)
            if question_type is not None:
                keep &= self.qtype[positions] == QUESTION_TYPE_CODES[question_type]
            positions, sims = positions[keep], sims[keep]
            labels = self.correct[positions]
            enough = labels.sum() >= needed and (~labels).sum() >= needed
            if enough or n_candidates >= self.live or n_candidates >= 32 * self.settings.candidates:
                break
            n_candidates *= 4
        if caption_vector is not None:
            sims = (1.0 - caption_weight) * sims + caption_weight * dot_rows(self.captions[positions], caption_vector)
        # The true bucket minimum is unknown without a full scan; a fixed sample estimates it.
        sample_low = np.inf
        if self._min_sample is not None:
            sample_low = float(dot_rows(self._min_sample, question_vector).min())
        low = min(sample_low, float(sims.min())) if len(sims) else sample_low
        return positions, sims.astype(np.float32), low


class NamespaceIndex:
    """The buckets of one namespace, keyed by modality."""

    def __init__(self, dim: int, settings: IndexSettings):
        self.dim = dim
        self.settings = settings
        self.buckets: dict[str, BucketIndex] = {}

    def bucket(self, modality: str) -> BucketIndex:
        if modality not in self.buckets:
            self.buckets[modality] = BucketIndex(self.dim, modality == "text+image", self.settings)
        return self.buckets[modality]
