"""Search over one reader's documents: BM25 (bm25s) and dense MiniLM vectors, fused by reciprocal rank.

An index holds every passage a namespace may read (its own collections and the shared ones) in
memory: the BM25 index over their stored tokens and one float32 matrix of their vectors, so a
query costs one sparse scoring and one matrix product (milliseconds at 100,000 passages).
"""

from __future__ import annotations

from dataclasses import dataclass

import bm25s
import numpy as np

from backend.documents.passages import DocPassage
from backend.tools.text_ranking import tokenize
from backend.tools.wiki_index import Embedder, reciprocal_rank_fusion

FUSION_DEPTH = 50  # candidates each retriever gives the fusion (as the wiki index)
DENSE_FLOOR = 0.35  # a passage no BM25 word matches is a candidate only this similar (cosine) to the query


@dataclass(frozen=True)
class IndexedPassage:
    """A passage with where it is kept: which collection (own or shared) and file."""

    collection: str
    shared: bool
    file: str
    passage: DocPassage


@dataclass
class Hit:
    entry: IndexedPassage
    score: float  # the fused score (or BM25's alone)
    similarity: float | None  # cosine to the query; None without an embedder


class DocumentIndex:
    def __init__(self, entries: list[IndexedPassage], tokens: list[list[str]], vectors: np.ndarray | None,
                 embedder: Embedder | None) -> None:
        if vectors is not None and len(vectors) != len(entries):
            raise ValueError(f"{len(vectors)} vectors for {len(entries)} passages")
        self.entries = entries
        self.embedder = embedder if vectors is not None else None
        self.vectors = vectors
        self.retriever: bm25s.BM25 | None = None
        if any(tokens):
            self.retriever = bm25s.BM25()
            self.retriever.index(tokens, show_progress=False)

    def __len__(self) -> int:
        return len(self.entries)

    def search(self, query_list: list[str], k: int) -> list[list[Hit]]:
        """The best `k` passages per query that match it: a BM25 word, or a dense similarity of at
        least DENSE_FLOOR; [] for a query nothing matches."""
        if not self.entries:
            return [[] for _ in query_list]
        similarities = None
        if self.embedder is not None:
            queries = normalized(self.embedder.encode(list(query_list)))
            similarities = queries @ self.vectors.T
        results = []
        for number, query in enumerate(query_list):
            rankings = [self._bm25_ranking(query)]
            if similarities is not None:
                row = similarities[number]
                rankings.append([(i, s) for i, s in _top(row, FUSION_DEPTH) if s >= DENSE_FLOOR])
            fused = reciprocal_rank_fusion(rankings) if similarities is not None else rankings[0]
            results.append([Hit(self.entries[i], float(score), None if similarities is None else float(similarities[number][i]))
                            for i, score in fused[:k]])
        return results

    def _bm25_ranking(self, query: str) -> list[tuple[int, float]]:
        if self.retriever is None:
            return []
        known = [token for token in tokenize([query])[0] if token in self.retriever.vocab_dict]
        if not known:
            return []
        return [(i, s) for i, s in _top(self.retriever.get_scores(known), FUSION_DEPTH) if s > 0]


def _top(scores: np.ndarray, depth: int) -> list[tuple[int, float]]:
    depth = min(depth, len(scores))
    if depth <= 0:
        return []
    candidates = np.argpartition(-scores, depth - 1)[:depth]
    order = candidates[np.argsort(-scores[candidates], kind="stable")]
    return [(int(i), float(scores[i])) for i in order]


def normalized(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float32)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
