"""Approximate nearest-neighbour search over question vectors (FAISS inverted file, inner product).

Used by a bucket once it holds more than `approximate_threshold` memories. It keeps the only
copy of those vectors, so a million memories cost one matrix of RAM, not two.
"""
from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

try:  # faiss-cpu is optional; without it every bucket stays exact
    import faiss
except ImportError:  # pragma: no cover - exercised only where faiss-cpu is missing
    faiss = None

TRAINING_POINTS_PER_LIST = 40


@contextmanager
def one_thread():
    """One query or one vector: OpenMP threads cost more to wake (and spin) than they save,
    badly so on a busy machine (measured: 3x less CPU per write). Bulk work keeps all threads."""
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(threads)


def faiss_available() -> bool:
    return faiss is not None


def list_count_for(n_vectors: int) -> int:
    # sqrt(N)/2 lists: training and assigning a million vectors stay a few seconds on 2 cores
    # (cold start), while a query with 16 probes scans about 3% of the vectors.
    # and FAISS wants about 39 training points per list
    return int(max(1, min(2048, math.sqrt(n_vectors) / 2, n_vectors // 39)))


def training_size_for(n_vectors: int) -> int:
    return list_count_for(n_vectors) * TRAINING_POINTS_PER_LIST


class InvertedFileIndex:
    """FAISS IndexIVFFlat keyed by database row ids; distances are exact inner products."""

    def __init__(self, dim: int, n_lists: int, n_probe: int):
        if faiss is None:
            raise RuntimeError("faiss-cpu is not installed")
        self.dim = dim
        self.n_lists = n_lists
        self._quantizer = faiss.IndexFlatIP(dim)
        self._index = faiss.IndexIVFFlat(self._quantizer, dim, n_lists, faiss.METRIC_INNER_PRODUCT)
        self._index.nprobe = min(n_probe, n_lists)
        self._index.cp.min_points_per_centroid = 1  # small buckets: fewer lists, not a warning

    @property
    def size(self) -> int:
        return int(self._index.ntotal)

    def training_size(self) -> int:
        return self.n_lists * TRAINING_POINTS_PER_LIST

    def train(self, sample: np.ndarray) -> None:
        self._index.train(np.ascontiguousarray(sample, dtype=np.float32))

    def add(self, vectors: np.ndarray, row_ids: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        row_ids = np.ascontiguousarray(row_ids, dtype=np.int64)
        if len(vectors) > 1:
            self._index.add_with_ids(vectors, row_ids)
            return
        with one_thread():
            self._index.add_with_ids(vectors, row_ids)

    def remove(self, row_ids: np.ndarray) -> None:
        with one_thread():
            self._index.remove_ids(np.ascontiguousarray(row_ids, dtype=np.int64))

    def search(self, query: np.ndarray, n: int, n_probe: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Up to n (similarity, row_id) pairs, best first; `n_probe` overrides the lists scanned."""
        params = faiss.SearchParametersIVF(nprobe=min(n_probe, self.n_lists)) if n_probe else None
        with one_thread():
            sims, ids = self._index.search(query.reshape(1, -1).astype(np.float32), n, params=params)
        keep = ids[0] >= 0
        return sims[0][keep], ids[0][keep]
