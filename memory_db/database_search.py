"""Contrastive search in PostgreSQL with pgvector: no process holds a namespace's vectors.

A search asks the HNSW index for the question's nearest memories of the bucket (namespace,
modality, optional question type), the candidates the in-process inverted file would rescore,
and ranks them with memory_db.scoring exactly as the in-process index does:

* min-max over the bucket needs the bucket's lowest similarity, which only a full scan knows. The
  in-process approximate path estimates it from a fixed sample; here the index itself is asked
  for the memories farthest from the question (nearest to its negation), and the estimate is the
  lower of their similarity and the candidates' (the highest is the best candidate's);
* the best k correct and k incorrect are taken apart: a label the candidates hold too few of
  (above the relevance floor) gets its own index scan, then an exact one;
* a bucket the index scan does not cover (it holds fewer memories than the candidates asked
  for, or an index scan filtered to the bucket runs dry) and that is smaller than
  `exact_limit` is scored exactly in SQL: the same result as the in-process exact index.

Every write updates the row that holds the vectors, in its own transaction, so a search sees
exactly what is committed.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import Connection, Float, bindparam, case, cast, func, literal, select, text, true
from sqlalchemy.sql.elements import ColumnElement

from .pgvector import Vector, VectorSupport, vector_literal, vector_memories
from .records import QUESTION_TYPES
from .scoring import CAPTION_WEIGHT, Ranked, rank_contrastive
from .vector_index import IndexSettings

MAX_EF_SEARCH = 1000  # pgvector's limit; an HNSW scan returns at most ef_search rows
NEAREST_CANDIDATES = 8  # a near-duplicate is among a question's few nearest
NEAREST_EF = 64
FARTHEST_CANDIDATES = 8
FARTHEST_EF = 40
WIDE_SCAN_ROWS = 500_000  # from this many memories in the table, candidate scans use MAX_EF_SEARCH
EXACT_MARGIN = 8  # rows per label beyond k + offset that an exact scan hands to the scorer (float noise)

table = vector_memories
columns = table.c


def _vector(value: np.ndarray) -> ColumnElement:
    return cast(literal(vector_literal(value)), Vector())


def _inner(column, vector: ColumnElement) -> ColumnElement:
    """pgvector's `<#>`: the negative inner product, the HNSW index's ordering operator."""
    return column.op("<#>", return_type=Float())(vector)


class _Candidates:
    """Rows handed to the scorer, by row id."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[bool, int, int, float]] = {}

    def add(self, rows: Sequence[Any]) -> None:
        for row in rows:
            self.rows.setdefault(int(row.row_id), (bool(row.correct), int(row.usage_count),
                                                   int(row.success_count), float(row.similarity)))

    def count(self, label: bool, min_similarity: float | None) -> int:
        return sum(1 for correct, _, _, sim in self.rows.values()
                   if correct == label and (min_similarity is None or sim >= min_similarity))

    def lowest(self) -> float:
        return min((sim for *_, sim in self.rows.values()), default=np.inf)

    def arrays(self):
        ids = np.fromiter(self.rows, np.int64, len(self.rows))
        values = list(self.rows.values())
        return (ids, np.array([v[3] for v in values], np.float64), np.array([v[0] for v in values], bool),
                np.array([v[1] for v in values], np.int64), np.array([v[2] for v in values], np.int64))


class DatabaseSearch:
    """Nearest-memory and contrastive search of the memories table in SQL."""

    def __init__(self, support: VectorSupport, settings: IndexSettings):
        self.support = support
        self.settings = settings
        self._rows, self._rows_read_at = 0.0, float("-inf")

    def _table_rows(self, conn: Connection) -> float:
        """The memories table's size as PostgreSQL estimates it (its statistics; re-read every minute)."""
        now = time.monotonic()
        if now - self._rows_read_at > 60:
            self._rows = float(conn.execute(text(
                "SELECT reltuples FROM pg_class WHERE oid = to_regclass('memories')")).scalar() or 0.0)
            self._rows_read_at = now
        return self._rows

    # ---- building blocks ------------------------------------------------------------------
    @staticmethod
    def _bucket(namespace: str, modality: str, question_type: str | None, label: bool | None = None) -> list:
        clauses = [columns.namespace == namespace, columns.modality == modality,
                   columns.question_vector.is_not(None), columns.question_type.in_(QUESTION_TYPES)]
        if question_type is not None:
            clauses.append(columns.question_type == question_type)
        if label is not None:
            clauses.append(columns.correct == label)
        return clauses

    @staticmethod
    def _similarity(question: ColumnElement, caption: ColumnElement | None, caption_weight: float) -> ColumnElement:
        """As the in-process index: cos(question), or with a caption (1 - w) cos(question) + w cos(caption);
        a stored text+image memory without a caption vector counts 0 for it (the index's zero vector)."""
        question_similarity = -_inner(columns.question_vector, question)
        if caption is None:
            return question_similarity
        caption_similarity = func.coalesce(-_inner(columns.caption_vector, caption), 0.0)
        return (1.0 - caption_weight) * question_similarity + caption_weight * caption_similarity

    def _scan_settings(self, conn: Connection, ef_search: int) -> None:
        conn.execute(text("SELECT set_config('hnsw.ef_search', :ef, true)"), {"ef": str(ef_search)})
        if self.support.iterative_scans:  # pgvector >= 0.8: a filtered scan goes on until LIMIT is met
            conn.execute(text("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)"))

    def _index_scan(self, conn: Connection, where: list, similarity: ColumnElement, order_by: ColumnElement,
                    limit: int, ef_search: int) -> list:
        """The `limit` rows nearest by `order_by` (the HNSW index's operator) among `where`."""
        self._scan_settings(conn, max(ef_search, limit))
        return conn.execute(
            select(columns.row_id, columns.correct, columns.usage_count, columns.success_count,
                   similarity.label("similarity"))
            .where(*where).order_by(order_by).limit(limit)
        ).all()

    def _bucket_smaller_than(self, conn: Connection, namespace: str, modality: str, limit: int) -> bool:
        """Whether (namespace, modality) holds fewer than `limit` rows; reads at most `limit` index entries."""
        inner = (select(literal(1)).select_from(table)
                 .where(columns.namespace == namespace, columns.modality == modality).limit(limit).subquery())
        return conn.execute(select(func.count()).select_from(inner)).scalar_one() < limit

    # ---- near-duplicates ----------------------------------------------------------------------
    def nearest(self, conn: Connection, namespace: str, modality: str, question_vector: np.ndarray,
                caption_vector: np.ndarray | None, correct: bool | None = None) -> tuple[int, float] | None:
        """The most similar memory of the bucket (row id, similarity), optionally of one label only,
        as BucketIndex.nearest: with a caption, 0.8 cos(question) + 0.2 cos(caption)."""
        question = _vector(question_vector)
        caption = _vector(caption_vector) if caption_vector is not None and modality == "text+image" else None
        # the duplicate test's fixed mix (0.8 / 0.2, as BucketIndex.nearest), whatever a search's weights
        similarity = self._similarity(question, caption, CAPTION_WEIGHT)
        where = self._bucket(namespace, modality, None, correct)
        rows = self._index_scan(conn, where, similarity, _inner(columns.question_vector, question),
                                NEAREST_CANDIDATES, NEAREST_EF)
        if len(rows) < NEAREST_CANDIDATES and self._bucket_smaller_than(conn, namespace, modality,
                                                                        self.settings.exact_limit):
            rows = conn.execute(  # no `<#>` in ORDER BY: every row of the bucket is compared
                select(columns.row_id, similarity.label("similarity")).where(*where)
                .order_by(similarity.desc(), columns.row_id).limit(1)).all()
        if not rows:
            return None
        best = max(rows, key=lambda row: (row.similarity, -row.row_id))
        return int(best.row_id), float(best.similarity)

    def nearest_many(self, conn: Connection, namespace: str, question_vectors: Sequence[np.ndarray],
                     correct: bool | None = None) -> list[tuple[int, float] | None]:
        """`nearest` for several caption-less (text) memories in one statement: one HNSW scan each,
        joined laterally. A memory whose scan finds fewer than the candidates asked for in a small
        bucket gets `nearest`'s exact scan."""
        if not question_vectors:
            return []
        self._scan_settings(conn, NEAREST_EF)
        label = "" if correct is None else " AND m.correct = :correct"
        statement = text(f"""
            SELECT q.i AS i, m.row_id AS row_id, -(m.question_vector <#> q.v) AS similarity
            FROM unnest(CAST(:vectors AS vector[])) WITH ORDINALITY AS q(v, i)
            CROSS JOIN LATERAL (
                SELECT row_id, question_vector FROM memories m
                WHERE m.namespace = :namespace AND m.modality = 'text' AND m.question_vector IS NOT NULL
                  AND m.question_type IN :types{label}
                ORDER BY m.question_vector <#> q.v LIMIT :limit) m
        """).bindparams(bindparam("types", expanding=True))
        params = {"vectors": "{" + ",".join(f'"{vector_literal(v)}"' for v in question_vectors) + "}",
                  "namespace": namespace, "types": list(QUESTION_TYPES), "limit": NEAREST_CANDIDATES}
        if correct is not None:
            params["correct"] = correct
        found: dict[int, list] = {}
        for row in conn.execute(statement, params):
            found.setdefault(int(row.i) - 1, []).append(row)
        best: list[tuple[int, float] | None] = []
        for i, vector in enumerate(question_vectors):
            rows = found.get(i, [])
            if len(rows) < NEAREST_CANDIDATES:
                best.append(self.nearest(conn, namespace, "text", vector, None, correct))
                continue
            top = max(rows, key=lambda row: (row.similarity, -row.row_id))
            best.append((int(top.row_id), float(top.similarity)))
        return best

    # ---- contrastive search ---------------------------------------------------------------------
    def search(self, conn: Connection, namespace: str, modality: str, question_vector: np.ndarray,
               caption_vector: np.ndarray | None, *, k: int, offset: int, question_type: str | None,
               min_similarity: float | None, similarity_weight: float, win_rate_weight: float,
               caption_weight: float) -> tuple[list[Ranked], list[Ranked]]:
        needed = k + offset
        if needed == 0:
            return [], []
        question = _vector(question_vector)
        caption = _vector(caption_vector) if caption_vector is not None and modality == "text+image" else None
        similarity = self._similarity(question, caption, caption_weight)
        distance = _inner(columns.question_vector, question)
        where = self._bucket(namespace, modality, question_type)
        weights = {"similarity_weight": similarity_weight, "win_rate_weight": win_rate_weight}

        wanted = min(MAX_EF_SEARCH, max(self.settings.candidates, 32 * needed))
        # a little more than asked, so dead and filtered rows the scan meets do not make it run short;
        # in a large graph the widest scan pgvector allows, whose candidates are nearer the true
        # nearest (1M memories: recall@4 0.90 with 640, 0.92 with 1000; 100k: 0.997 either way)
        ef = MAX_EF_SEARCH if self._table_rows(conn) >= WIDE_SCAN_ROWS else min(MAX_EF_SEARCH, wanted + wanted // 4)
        rows = self._index_scan(conn, where, similarity, distance, wanted, ef)
        if len(rows) < wanted and self._bucket_smaller_than(conn, namespace, modality, self.settings.exact_limit):
            return self._exact(conn, where, similarity, k=k, offset=offset,
                               min_similarity=min_similarity, **weights)
        candidates = _Candidates()
        candidates.add(rows)
        if not candidates.rows:
            return [], []
        # the bucket's lowest similarity, estimated: the memories farthest from the question
        farthest = self._index_scan(conn, where, similarity, _inner(columns.question_vector, _vector(-question_vector)),
                                    FARTHEST_CANDIDATES, FARTHEST_EF)
        low = min([candidates.lowest()] + [float(row.similarity) for row in farthest])
        high = max(sim for *_, sim in candidates.rows.values())
        covered = min_similarity is not None and candidates.lowest() < min_similarity
        for label in (True, False):
            if covered or candidates.count(label, min_similarity) >= needed:
                continue  # every memory of the label above the floor is already a candidate
            where_label = self._bucket(namespace, modality, question_type, label)
            more = self._index_scan(conn, where_label, similarity, distance, MAX_EF_SEARCH, MAX_EF_SEARCH)
            candidates.add(more)
            if len(more) < MAX_EF_SEARCH and candidates.count(label, min_similarity) < needed:
                extra = self._exact_label(conn, where_label, similarity, low, high, needed,
                                          min_similarity, **weights)
                candidates.add(extra)
                low = min([low] + [float(row.lowest) for row in extra])
                high = max([high] + [float(row.similarity) for row in extra])
        row_ids, sims, correct, usage, success = candidates.arrays()
        return rank_contrastive(row_ids=row_ids, similarity=sims, correct=correct, usage=usage, success=success,
                                k=k, offset=offset, low=low, high=high, min_similarity=min_similarity, **weights)

    def _score(self, similarity: ColumnElement, usage, success, low, high, similarity_weight: float,
               win_rate_weight: float) -> ColumnElement:
        """memory_db.scoring.contrastive_scores in SQL (used to pick rows; the scorer ranks them)."""
        spread = high - low
        norm = case((spread <= 1e-12, 1.0), else_=(similarity - low) / func.nullif(spread, 0.0))
        return similarity_weight * norm + win_rate_weight * (cast(success, Float()) / func.greatest(usage, 1))

    def _exact(self, conn: Connection, where: list, similarity: ColumnElement, *, k: int, offset: int,
               min_similarity: float | None, similarity_weight: float, win_rate_weight: float):
        """Every row of the bucket scored (min-max over all of it), the best of each label ranked."""
        bucket = (select(columns.row_id, columns.correct, columns.usage_count, columns.success_count,
                         similarity.label("similarity")).where(*where).cte("bucket"))
        bounds = select(func.min(bucket.c.similarity).label("low"),
                        func.max(bucket.c.similarity).label("high")).cte("bounds")
        score = self._score(bucket.c.similarity, bucket.c.usage_count, bucket.c.success_count,
                            bounds.c.low, bounds.c.high, similarity_weight, win_rate_weight)
        rank = func.row_number().over(partition_by=bucket.c.correct,
                                      order_by=(score.desc(), bucket.c.similarity.desc(), bucket.c.row_id))
        ranked = (select(bucket, bounds.c.low, bounds.c.high, rank.label("rank"))
                  .select_from(bucket.join(bounds, true())))
        if min_similarity is not None:
            ranked = ranked.where(bucket.c.similarity >= min_similarity)
        ranked = ranked.subquery()
        rows = conn.execute(select(ranked).where(ranked.c.rank <= k + offset + EXACT_MARGIN)).all()
        if not rows:
            return [], []
        candidates = _Candidates()
        candidates.add(rows)
        row_ids, sims, correct, usage, success = candidates.arrays()
        return rank_contrastive(row_ids=row_ids, similarity=sims, correct=correct, usage=usage, success=success,
                                k=k, offset=offset, low=float(rows[0].low), high=float(rows[0].high),
                                min_similarity=min_similarity, similarity_weight=similarity_weight,
                                win_rate_weight=win_rate_weight)

    def _exact_label(self, conn: Connection, where: list, similarity: ColumnElement, low: float, high: float,
                     needed: int, min_similarity: float | None, *, similarity_weight: float,
                     win_rate_weight: float) -> list:
        """The best rows of one label by score, every row of it compared (a label the index scans
        found too few of); each row carries the label's lowest similarity."""
        labelled = select(columns.row_id, columns.correct, columns.usage_count, columns.success_count,
                          similarity.label("similarity")).where(*where).cte("labelled")
        lowest = select(func.min(labelled.c.similarity).label("lowest")).cte("lowest")
        score = self._score(labelled.c.similarity, labelled.c.usage_count, labelled.c.success_count,
                            func.least(literal(low), lowest.c.lowest), literal(high),
                            similarity_weight, win_rate_weight)
        query = select(labelled, lowest.c.lowest).select_from(labelled.join(lowest, true()))
        if min_similarity is not None:
            query = query.where(labelled.c.similarity >= min_similarity)
        return conn.execute(query.order_by(score.desc(), labelled.c.similarity.desc(), labelled.c.row_id)
                            .limit(needed + EXACT_MARGIN)).all()
