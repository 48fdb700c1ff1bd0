"""Contrastive search: the best successful and the best failed memories for a question."""
from __future__ import annotations

import numpy as np
from sqlalchemy import Connection, select

from .errors import InvalidMemoryError
from .records import MODALITIES, ContrastiveMemories, Memory, ScoredMemory, modality_for
from .rows import MEMORY_COLUMNS, memory_from_row, row_problem
from .schema import memories, struck_sources
from .scoring import CAPTION_WEIGHT, SIMILARITY_WEIGHT, WIN_RATE_WEIGHT
from .store_base import StoreBase
from .validation import check_namespace, check_question_type, check_scoring_weights, check_text


class Searching(StoreBase):
    def search_contrastive(
        self, question: str, *, namespace: str = "default", caption: str | None = None, k: int = 2,
        offset: int = 0, question_type: str | None = None, modality: str | None = None,
        min_similarity: float | None = None, similarity_weight: float = SIMILARITY_WEIGHT,
        win_rate_weight: float = WIN_RATE_WEIGHT, caption_weight: float = CAPTION_WEIGHT,
    ) -> ContrastiveMemories:
        """The k best successful and k best failed memories for `question` (MIA scoring) in
        the bucket namespace + modality (+ question_type); `offset` pages further; a memory less
        similar to the question than `min_similarity` is left out. The score is
        ``similarity_weight * minmax(similarity) + win_rate_weight * win rate``; with a caption the
        similarity is ``(1 - caption_weight) * cos(question) + caption_weight * cos(caption)``
        (defaults: the paper's, memory_db.scoring)."""
        check_text("question", question)
        vectors = self._encode(question, caption)
        return self.search_contrastive_vectors(
            vectors[0], vectors[1], namespace=namespace, k=k, offset=offset,
            question_type=question_type, modality=modality or modality_for(caption), min_similarity=min_similarity,
            similarity_weight=similarity_weight, win_rate_weight=win_rate_weight, caption_weight=caption_weight,
        )

    def search_contrastive_vectors(
        self, question_vector: np.ndarray, caption_vector: np.ndarray | None = None, *,
        namespace: str = "default", k: int = 2, offset: int = 0, question_type: str | None = None,
        modality: str = "text", min_similarity: float | None = None, similarity_weight: float = SIMILARITY_WEIGHT,
        win_rate_weight: float = WIN_RATE_WEIGHT, caption_weight: float = CAPTION_WEIGHT,
    ) -> ContrastiveMemories:
        """search_contrastive for already-embedded queries (normalised float32 vectors)."""
        check_scoring_weights(similarity_weight, win_rate_weight, caption_weight)
        check_namespace(namespace)
        if question_type is not None:
            check_question_type(question_type)
        if modality not in MODALITIES:
            raise InvalidMemoryError(f"Modality {modality!r} is unknown; use one of: {', '.join(MODALITIES)}.")
        if not isinstance(k, int) or not isinstance(offset, int) or k < 0 or offset < 0:
            raise InvalidMemoryError(f"k and offset must be non-negative integers, got k={k!r}, offset={offset!r}.")
        question_vector = np.asarray(question_vector, np.float32)
        caption_vector = None if caption_vector is None else np.asarray(caption_vector, np.float32)
        weights = {"similarity_weight": similarity_weight, "win_rate_weight": win_rate_weight,
                   "caption_weight": caption_weight}
        with self._engine.connect() as conn:
            struck = self._struck_memory_ids(conn, namespace)
            # struck memories are never retrieved: rank past them, then page over the rest
            successful, failed = self._vectors.search(
                conn, namespace, modality, question_vector, caption_vector,
                k=k + offset + len(struck) if struck else k, offset=0 if struck else offset,
                question_type=question_type, min_similarity=min_similarity, **weights)
            by_row = self._memories_by_row_id(conn, namespace, [r.row_id for r in successful + failed])
        def scored(ranked):
            kept = [ScoredMemory(by_row[r.row_id], r.similarity, r.score) for r in ranked if r.row_id in by_row]
            if not struck:
                return kept
            return [s for s in kept if s.memory.id not in struck][offset:offset + k]
        return ContrastiveMemories(successful=scored(successful), failed=scored(failed))

    @staticmethod
    def _struck_memory_ids(conn: Connection, namespace: str) -> frozenset[str]:
        rows = conn.execute(select(struck_sources.c.memory_id).where(
            struck_sources.c.namespace == namespace, struck_sources.c.kind == "memory",
            struck_sources.c.active.is_(True))).scalars().all()
        return frozenset(rows)

    def _memories_by_row_id(self, conn: Connection, namespace: str, row_ids: list[int]) -> dict[int, Memory]:
        if not row_ids:
            return {}
        # By primary key alone: with "namespace = ?" added, SQLite may walk the namespace index
        # (every row of a big namespace) instead. The namespace is checked on the rows instead.
        rows = conn.execute(select(*MEMORY_COLUMNS).where(memories.c.row_id.in_(row_ids))).all()
        return {row.row_id: memory_from_row(row) for row in rows
                if row.namespace == namespace and row_problem(row) is None}
