"""MemoryStore: the Manager's memory of how questions were answered (MIA non-parametric memory).

Rows live in SQLite or PostgreSQL (SQLAlchemy Core); each namespace's vectors live in this process
or, on PostgreSQL with pgvector, in the rows (memory_db.vector_backend). All writes of one process
go through one lock.
"""
from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import numpy as np
from sqlalchemy import Connection, delete, func, insert, select, update

from .database import migrate, open_engine
from .database_search import DatabaseSearch
from .embedder import Embedder, get_embedder
from .errors import (
    CapacityError,
    HistoryNotFoundError,
    ImportFileError,
    InvalidMemoryError,
    MemoryNotFoundError,
)
from .history import history_entry, reverted_state
from .learning_queue import (
    QueueEntry,
    check_entry,
    count_entries,
    insert_entry,
    mark_taken,
    quarantine_entries,
    read_entries,
)
from .lease import DEFAULT_TTL_S, LearnerLease, LeaseFence
from .login_failures import LoginFailures
from .lifecycle import (EXACT_DUPLICATE_SIMILARITY, NEW_MEMORY_COUNTS, eviction_order, is_verified, new_is_better,
                        replaces_exact_duplicate, with_outcome)
from .loading import load_namespace
from .pgvector import enable_vectors
from .records import (
    MODALITIES,
    ContrastiveMemories,
    HistoryEntry,
    Memory,
    NewMemory,
    ScoredMemory,
    UnreadableMemory,
    modality_for,
)
from .rows import (
    MEMORY_COLUMNS,
    memory_from_row,
    row_problem,
    row_values,
    to_db_time,
    utc_now,
    vectors_problem,
)
from .schema import memories, memory_history, recorded_verdicts
from .scoring import CAPTION_WEIGHT, SIMILARITY_WEIGHT, WIN_RATE_WEIGHT
from .snapshots import memory_from_record
from .transfer import read_import_file, write_export
from .validation import (
    check_memory,
    check_namespace,
    check_new_memory,
    check_question_type,
    check_scoring_weights,
    check_summary,
    check_text,
)
from .vector_backend import (BYTE_COLUMNS, VECTOR_COLUMNS, DatabaseVectors, EmbeddingColumns, InProcessVectors,
                             Nearest, VectorBackend, VectorTransaction)
from .vector_index import IndexSettings, NamespaceIndex

LIST_ORDERS = ("created_at", "updated_at", "win_rate", "usage_count")
log = logging.getLogger(__name__)
IMPORT_EXISTING = ("refuse", "skip", "replace")  # what an import does with an id the namespace holds


@dataclass
class ImportOutcome:
    """What an import did: memories added, replaced (same id, the file's version) and skipped
    (same id, the stored one kept), and history entries added."""

    added: int = 0
    replaced: int = 0
    skipped: int = 0
    history: int = 0


def _history_key(entry) -> tuple:
    """What makes two history entries the same change (an export imported back holds them again);
    not the actor, which an import makes the importer."""
    created = entry["created_at"]
    created = to_db_time(created) if created.tzinfo is not None else created
    return entry["memory_id"], entry["action"], created


class MemoryStore:
    """Stores, scores and retrieves workflow memories, partitioned by namespace."""

    def __init__(
        self,
        url: str,
        *,
        embedder: Embedder | None = None,
        capacity: int | None = None,
        namespace_capacity: dict[str, int] | None = None,
        merge_threshold: float | None = 0.95,
        index_settings: IndexSettings | None = None,
    ):
        """`capacity`: most memories per namespace (None: unlimited), overridden per namespace
        by `namespace_capacity`. `merge_threshold`: a new memory at least this similar to a
        stored one is merged into it (None: never merge; exact repeats are always handled)."""
        for name, value in [("capacity", capacity), *(namespace_capacity or {}).items()]:
            if value is not None and (not isinstance(value, int) or value < 1):
                raise InvalidMemoryError(f"Capacity for {name!r} must be a positive integer, got {value!r}.")
        if merge_threshold is not None and not 0.0 < merge_threshold <= 1.0:
            raise InvalidMemoryError(f"merge_threshold must be in (0, 1] or None, got {merge_threshold!r}.")
        self.url = url
        self._engine = open_engine(url)
        migrate(self._engine)
        self._embedder = embedder
        self._capacity = capacity
        self._namespace_capacity = dict(namespace_capacity or {})
        self._merge_threshold = merge_threshold
        self._index_settings = index_settings or IndexSettings()
        self._lock = threading.RLock()
        self._columns, self._vectors = self._open_vectors()

    def _open_vectors(self) -> tuple[EmbeddingColumns, VectorBackend]:
        """Where this database keeps the vectors: in the rows' vector columns when PostgreSQL has
        pgvector, searched in SQL unless the index settings say otherwise; else in this process."""
        # the loader is looked up on each load, so that a test can count loads on the instance
        in_process = InProcessVectors(self._lock, self._writer, lambda namespace: self._load_namespace(namespace))
        if self._engine.dialect.name != "postgresql":
            return BYTE_COLUMNS, in_process
        with self._engine.begin() as conn:
            support = enable_vectors(conn)  # migration 0005 does this; again here, should pgvector come later
        if not support.enabled:
            log.warning(
                "Memory store on PostgreSQL without pgvector (%s): embeddings stay bytes and each process "
                "searches its own in-memory copy of a namespace, reloaded whenever another process writes "
                "to it. For search in the database, create the extension (CREATE EXTENSION vector, as a "
                "superuser) or run a server that has it: python -m memory_db.pgvector_server DATA_DIR.",
                support.reason)
            return BYTE_COLUMNS, in_process
        if not self._index_settings.database_search:
            return VECTOR_COLUMNS, in_process
        database_search = DatabaseSearch(support, self._index_settings)
        log.info("Memory store on PostgreSQL with pgvector %s: search in SQL (HNSW index)", support.version)
        return VECTOR_COLUMNS, DatabaseVectors(database_search, self._lock, self._writer)

    def _load_namespace(self, namespace: str) -> tuple[NamespaceIndex, int]:
        return load_namespace(self._engine, namespace, self._index_settings)

    # ---- plumbing -------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = get_embedder()
        return self._embedder

    def _writer(self):
        return self._engine.execution_options(sqlite_write=True).begin()

    def _encode(self, question: str, caption: str | None) -> tuple[np.ndarray, np.ndarray | None]:
        vectors = self.embedder.encode([question] + ([caption] if caption else []))
        return vectors[0], (vectors[1] if caption else None)

    def _row(self, conn: Connection, namespace: str, memory_id: str, *, with_vectors: bool = False):
        columns = list(MEMORY_COLUMNS)
        if with_vectors:
            columns += [memories.c.question_embedding, memories.c.caption_embedding]
        return conn.execute(
            select(*columns).where(memories.c.namespace == namespace, memories.c.id == memory_id)
        ).one_or_none()

    def _record_history(self, conn: Connection, memory_id: str, namespace: str, action: str,
                        before: Memory | None, after: Memory | None, actor: str) -> int:
        # parameters passed apart from the statement: SQLAlchemy compiles it once and caches it
        result = conn.execute(memory_history.insert(), {
            "memory_id": memory_id, "namespace": namespace, "action": action,
            "before": before.to_json_dict() if before else None,
            "after": after.to_json_dict() if after else None,
            "actor": actor, "created_at": to_db_time(utc_now()),
        })
        return int(result.inserted_primary_key[0])

    def _write_state(self, conn: Connection, stored_vectors: VectorTransaction, namespace: str,
                     current_row: Any | None, target: Memory | None,
                     vectors: tuple[np.ndarray, np.ndarray | None] | None) -> int | None:
        """Make the database hold `target` (None: nothing) where `current_row` was, and tell
        `stored_vectors`. `vectors` are needed when the question or caption changes; with pgvector
        they go into the row's vector columns in the same statement. Every write of a memory passes
        here, so every one is checked for `namespace` here."""
        if target is not None:
            check_memory(target, namespace)
        if current_row is not None and (target is None or target.modality != current_row.modality):
            conn.execute(delete(memories).where(memories.c.row_id == current_row.row_id))
            stored_vectors.removed(current_row.modality, current_row.row_id)
            current_row = None
        if target is None:
            return None
        values = row_values(target)
        if vectors is not None:
            values.update(self._columns.values(*vectors))
        rows = self._columns.table
        if current_row is None:
            if vectors is None:
                raise AssertionError("inserting a memory needs its vectors")
            row_id = int(conn.execute(rows.insert(), values).inserted_primary_key[0])
            stored_vectors.added(row_id, target, vectors)
            return row_id
        row_id = current_row.row_id
        conn.execute(update(rows).where(rows.c.row_id == row_id).values(**values))
        stored_vectors.changed(row_id, target, vectors)
        return row_id

    def _capacity_for(self, namespace: str) -> int | None:
        return self._namespace_capacity.get(namespace, self._capacity)

    def _evict_over_capacity(self, conn: Connection, stored_vectors: VectorTransaction, namespace: str,
                             keep_row_id: int | None, actor: str) -> None:
        capacity = self._capacity_for(namespace)
        if capacity is None:
            return
        excess = conn.execute(
            select(func.count()).select_from(memories).where(memories.c.namespace == namespace)
        ).scalar_one() - capacity
        if excess <= 0:
            return
        victims = conn.execute(eviction_order(namespace, keep_row_id).limit(excess)).scalars().all()
        if len(victims) < excess:
            raise CapacityError(
                f"Namespace {namespace!r} is full ({capacity} memories) and the rest are pinned; "
                "unpin or delete some memories, or raise the capacity."
            )
        for row_id in victims:
            row = conn.execute(select(*MEMORY_COLUMNS).where(memories.c.row_id == row_id)).one()
            victim = None if row_problem(row) else memory_from_row(row)
            self._write_state(conn, stored_vectors, namespace, row, None, None)
            self._record_history(conn, row.id, namespace, "evict", victim, None, actor)

    # ---- adding and retrieving --------------------------------------------------------------
    def add(self, new: NewMemory, *, actor: str = "manager", keep_contrast: bool = False) -> Memory:
        """Store a memory. A repeat of a stored question replaces it or is dropped (see
        lifecycle.replaces_exact_duplicate); a near-duplicate is merged into it; then the
        namespace is trimmed to capacity. Returns the memory as stored (possibly the merged one).

        `keep_contrast`: repeats and near-duplicates are looked for among memories with the same
        label only, so one question can keep a success and a failure side by side (test-time
        learning stores its best correct and one incorrect rollout)."""
        check_new_memory(new)
        vectors = self._encode(new.question, new.caption)
        return self._vectors.write(new.namespace, lambda conn, stored_vectors: self._add_in(
            conn, stored_vectors, new, vectors, actor, keep_contrast))

    def add_many(self, news: list[NewMemory], *, actor: str = "manager", keep_contrast: bool = False) -> list[Memory]:
        """Store several memories as `add` stores each, with one embedding call for all of them and one
        committed transaction per namespace (a bulk import, a learner's consolidation, many users'
        runs written together). Within a batch, a later memory is checked against the earlier ones
        like any stored memory. Returns the memories as stored, in order."""
        news = list(news)
        for new in news:
            check_new_memory(new)
        if not news:
            return []
        texts, slots = [], []
        for new in news:
            slots.append((len(texts), len(texts) + 1 if new.caption else None))
            texts += [new.question] + ([new.caption] if new.caption else [])
        encoded = self.embedder.encode(texts)
        vectors = [(encoded[q], encoded[c] if c is not None else None) for q, c in slots]
        stored: list[Memory] = [None] * len(news)  # type: ignore[list-item]  # every slot is filled below
        by_namespace: dict[str, list[int]] = {}
        for position, new in enumerate(news):
            by_namespace.setdefault(new.namespace, []).append(position)
        for namespace, positions in by_namespace.items():
            def work(conn: Connection, stored_vectors: VectorTransaction) -> dict[int, Memory]:
                batch = [(p, news[p], vectors[p]) for p in positions]
                done = self._insert_new(conn, stored_vectors, namespace, batch, actor, keep_contrast)
                for position, new, vector in batch:  # the rest as `add` does it, each seeing the ones before
                    if position not in done:
                        stored_vectors.apply_pending()
                        done[position] = self._add_in(conn, stored_vectors, new, vector, actor, keep_contrast)
                stored_vectors.apply_pending()
                return done

            try:
                for position, memory in self._vectors.write(namespace, work).items():
                    stored[position] = memory
            except Exception:
                self._vectors.forget(namespace)  # it may hold rows the failed transaction never wrote
                raise
        return stored

    def _insert_new(self, conn: Connection, stored_vectors: VectorTransaction, namespace: str,
                    batch: list, actor: str, keep_contrast: bool) -> dict[int, Memory]:
        """add_many's fast path: the memories of `batch` that resemble no stored memory and no other
        memory of the batch, inserted with one statement (and their history with another); returns
        them by position. The others are left for `_add_in`, which merges or replaces."""
        floor = min(EXACT_DUPLICATE_SIMILARITY, self._merge_threshold or 1.0)
        # cos(question) alone may be this much below the caption-weighted similarity the store compares
        margin = CAPTION_WEIGHT * 2
        questions = np.stack([vector[0] for _, _, vector in batch]).astype(np.float32)
        similar = questions @ questions.T
        # like an earlier memory of this batch: `_add_in` compares it once that one is in
        alone = [i for i in range(len(batch)) if not i or float(similar[i, :i].max()) < floor - margin]
        nearest: dict[int, Nearest] = {}
        plain = [i for i in alone if batch[i][1].caption is None and not keep_contrast]
        if plain:  # the batch's text memories together (in SQL: one statement)
            nearest.update(zip(plain, stored_vectors.nearest_many([batch[i][2][0] for i in plain])))
        fresh_rows, fresh = [], {}
        for i in alone:
            position, new, vector = batch[i]
            modality = modality_for(new.caption)
            if i not in nearest:
                nearest[i] = stored_vectors.nearest(modality, vector, new.correct if keep_contrast else None)
            if nearest[i] is not None and nearest[i][1] >= floor:
                continue
            memory = _fresh_memory(new, modality, utc_now())
            check_memory(memory, namespace)
            fresh[position] = memory
            fresh_rows.append((position, memory, vector, {**row_values(memory), **self._columns.values(*vector)}))
        if not fresh_rows:
            return {}
        table = self._columns.table
        inserted = conn.execute(table.insert().returning(table.c.row_id, sort_by_parameter_order=True),
                                [values for *_, values in fresh_rows]).scalars().all()
        conn.execute(memory_history.insert(), [{
            "memory_id": memory.id, "namespace": namespace, "action": "add", "before": None,
            "after": memory.to_json_dict(), "actor": actor, "created_at": to_db_time(utc_now()),
        } for _, memory, _, _ in fresh_rows])
        for row_id, (_, memory, vector, _) in zip(inserted, fresh_rows):
            stored_vectors.added(int(row_id), memory, vector)
        self._evict_over_capacity(conn, stored_vectors, namespace, int(inserted[-1]), actor)
        return fresh

    def _add_in(self, conn: Connection, stored_vectors: VectorTransaction, new: NewMemory, vectors,
                actor: str, keep_contrast: bool) -> Memory:
        """`add`'s work inside a write transaction."""
        modality = modality_for(new.caption)
        now = utc_now()
        fresh = _fresh_memory(new, modality, now)
        nearest = stored_vectors.nearest(modality, vectors, new.correct if keep_contrast else None)
        duplicate_floor = min(EXACT_DUPLICATE_SIMILARITY, self._merge_threshold or 1.0)
        existing_row = None
        if nearest is not None and nearest[1] >= duplicate_floor:
            existing_row = conn.execute(
                select(*MEMORY_COLUMNS).where(memories.c.row_id == nearest[0])
            ).one()
        if existing_row is not None and row_problem(existing_row) is None:  # an unreadable row is no duplicate
            existing = memory_from_row(existing_row)
            similarity = nearest[1]
            if similarity >= EXACT_DUPLICATE_SIMILARITY:
                if not replaces_exact_duplicate(existing, new):
                    if not is_verified(new):
                        return existing  # the Judge's opinion alone changes nothing that stays
                    # A verified run of a question kept as it is adds its outcome, with history.
                    target = with_outcome(existing, existing, new.correct, now)
                    return self._update_existing(conn, stored_vectors, existing_row, existing, target,
                                                 None, "outcome", actor)
                target = replace(fresh, id=existing.id, created_at=existing.created_at,
                                 pinned=existing.pinned)
                return self._update_existing(conn, stored_vectors, existing_row, existing, target,
                                             vectors, "replace", actor)
            if self._merge_threshold is not None and similarity >= self._merge_threshold:
                base = fresh if new_is_better(existing, new) else existing
                target = replace(with_outcome(base, existing, new.correct, now), id=existing.id,
                                 created_at=existing.created_at, pinned=existing.pinned)
                return self._update_existing(conn, stored_vectors, existing_row, existing, target,
                                             vectors if base is fresh else None, "merge", actor)
        row_id = self._write_state(conn, stored_vectors, new.namespace, None, fresh, vectors)
        self._record_history(conn, fresh.id, new.namespace, "add", None, fresh, actor)
        self._evict_over_capacity(conn, stored_vectors, new.namespace, row_id, actor)
        return fresh

    def _update_existing(self, conn, stored_vectors, existing_row, existing: Memory, target: Memory,
                         vectors, action: str, actor: str) -> Memory:
        self._write_state(conn, stored_vectors, existing.namespace, existing_row, target, vectors)
        self._record_history(conn, existing.id, existing.namespace, action, existing, target, actor)
        return target

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
            successful, failed = self._vectors.search(
                conn, namespace, modality, question_vector, caption_vector, k=k, offset=offset,
                question_type=question_type, min_similarity=min_similarity, **weights)
            by_row = self._memories_by_row_id(conn, namespace, [r.row_id for r in successful + failed])
        def scored(ranked):
            return [ScoredMemory(by_row[r.row_id], r.similarity, r.score) for r in ranked if r.row_id in by_row]
        return ContrastiveMemories(successful=scored(successful), failed=scored(failed))

    def _memories_by_row_id(self, conn: Connection, namespace: str, row_ids: list[int]) -> dict[int, Memory]:
        if not row_ids:
            return {}
        # By primary key alone: with "namespace = ?" added, SQLite may walk the namespace index
        # (every row of a big namespace) instead. The namespace is checked on the rows instead.
        rows = conn.execute(select(*MEMORY_COLUMNS).where(memories.c.row_id.in_(row_ids))).all()
        return {row.row_id: memory_from_row(row) for row in rows
                if row.namespace == namespace and row_problem(row) is None}

    def record_outcome(self, memory_ids: list[str], *, correct: bool, namespace: str = "default",
                       missing_ok: bool = False) -> None:
        """Every memory shown to the Planner: usage + 1; success + 1 when the answer was judged
        correct. Unknown ids raise MemoryNotFoundError (nothing updated) unless `missing_ok`."""
        check_namespace(namespace)
        if not isinstance(correct, bool):
            raise InvalidMemoryError(f"correct must be True or False, got {correct!r}.")
        wanted = list(dict.fromkeys(memory_ids))
        if not wanted:
            return
        self._vectors.write(namespace, lambda conn, stored_vectors: self._count_outcome(
            conn, stored_vectors, namespace, wanted, correct, missing_ok))

    def _count_outcome(self, conn: Connection, stored_vectors: VectorTransaction, namespace: str,
                       wanted: list[str], correct: bool, missing_ok: bool) -> None:
        rows = conn.execute(
            select(memories.c.row_id, memories.c.id, memories.c.modality, memories.c.usage_count,
                   memories.c.success_count)
            .where(memories.c.namespace == namespace, memories.c.id.in_(wanted))
        ).all()
        found = {row.id for row in rows}
        missing = [memory_id for memory_id in wanted if memory_id not in found]
        if missing and not missing_ok:
            raise MemoryNotFoundError(missing[0], namespace)
        if not rows:
            return
        conn.execute(update(memories).where(memories.c.row_id.in_([r.row_id for r in rows])).values(
            usage_count=memories.c.usage_count + 1,
            success_count=memories.c.success_count + (1 if correct else 0),
        ))
        for row in rows:
            stored_vectors.counted(row.modality, row.row_id, row.usage_count + 1,
                                   row.success_count + (1 if correct else 0))

    def record_verdict(self, key: str, *, namespace: str, memory_id: str | None, used_ids: list[str],
                       correct: bool, count_outcome: bool, provenance_update: dict, actor: str) -> bool:
        """A verdict on a finished run, in one transaction and at most once per `key` (so it can be
        replayed after a crash): the run's memory, when it still exists, gets the label and
        `provenance_update`; with `count_outcome`, each memory the run used gets one more outcome (as
        record_outcome). Returns False when `key` was recorded before and nothing changed."""
        verdict = dict(memory_id=memory_id, used_ids=used_ids, correct=correct, count_outcome=count_outcome,
                       provenance_update=provenance_update, actor=actor)
        self._check_verdict(key, namespace, verdict)
        if key in self.recorded_verdicts([key], namespace=namespace):
            return False  # checked before the write transaction too: a replay leaves other processes' indexes alone
        return self._vectors.write(namespace, lambda conn, stored_vectors: self._apply_verdict(
            conn, stored_vectors, namespace, key, verdict))

    @staticmethod
    def _check_verdict(key: str, namespace: str, verdict: dict) -> None:
        check_namespace(namespace)
        if len(check_text("key", key)) > 64:
            raise InvalidMemoryError(f"A verdict key has at most 64 characters, got {len(key)}.")
        if not isinstance(verdict.get("correct"), bool):
            raise InvalidMemoryError(f"correct must be True or False, got {verdict.get('correct')!r}.")

    def _apply_verdict(self, conn: Connection, stored_vectors: VectorTransaction, namespace: str,
                       key: str, verdict: dict) -> bool:
        already = conn.execute(select(recorded_verdicts.c.key).where(
            recorded_verdicts.c.namespace == namespace, recorded_verdicts.c.key == key)).first()
        if already is not None:
            return False
        memory_id, correct = verdict["memory_id"], verdict["correct"]
        row = self._row(conn, namespace, memory_id) if memory_id else None
        if row is not None and row_problem(row) is None:
            before = memory_from_row(row)
            after = replace(before, correct=correct, provenance={**before.provenance, **verdict["provenance_update"]})
            if after != before:
                after = replace(after, updated_at=utc_now())
                self._write_state(conn, stored_vectors, namespace, row, after, None)
                self._record_history(conn, before.id, namespace, "relabel", before, after, verdict["actor"])
        used_ids = verdict["used_ids"]
        if verdict["count_outcome"] and used_ids:
            self._count_outcome(conn, stored_vectors, namespace, list(dict.fromkeys(used_ids)), correct, True)
        conn.execute(recorded_verdicts.insert(), {"namespace": namespace, "key": key,
                                                  "created_at": to_db_time(utc_now())})
        return True

    # ---- test-time learning's queue -----------------------------------------------------------
    def enqueue(self, key: str, *, namespace: str, kind: str, run_id: str, item: dict,
                verdict: dict | None = None, taken_by: str | None = None) -> bool:
        """Queue `item` for test-time learning under `key`, at most once. With `verdict` (the
        arguments of record_verdict but the key), the verdict is applied in the same transaction:
        the queued feedback and its relabel are written together or not at all. `taken_by` queues it
        as already taken (an import of what a learner had read). Returns False when `key` was queued
        before and nothing changed."""
        check_namespace(namespace)
        item_json = check_entry(key, kind, run_id, item)
        entry = dict(key=key, namespace=namespace, kind=kind, run_id=run_id, item_json=item_json, taken_by=taken_by)
        if verdict is None:
            with self._writer() as conn:
                return insert_entry(conn, **entry)
        self._check_verdict(key, namespace, verdict)

        def work(conn: Connection, stored_vectors: VectorTransaction) -> bool:
            if not insert_entry(conn, **entry):
                return False
            self._apply_verdict(conn, stored_vectors, namespace, key, verdict)
            return True

        return self._vectors.write(namespace, work)

    def queue_entries(self, *, namespace: str | None = None, kind: str | None = None, run_id: str | None = None,
                      untaken: bool = False, quarantined: bool = False, limit: int | None = None,
                      newest_first: bool = False) -> list[QueueEntry]:
        """Queued entries in order (of one namespace, kind or run; only those no learner took; only
        those the learner quarantined)."""
        if namespace is not None:
            check_namespace(namespace)
        with self._engine.connect() as conn:
            return read_entries(conn, namespace=namespace, kind=kind, run_id=run_id, untaken=untaken,
                                quarantined=quarantined, limit=limit, newest_first=newest_first)

    def queue_count(self, *, namespace: str | None = None, kind: str | None = None, untaken: bool = False,
                    quarantined: bool = False) -> int:
        if namespace is not None:
            check_namespace(namespace)
        with self._engine.connect() as conn:
            return count_entries(conn, namespace=namespace, kind=kind, untaken=untaken, quarantined=quarantined)

    def mark_queue_taken(self, seqs: list[int], *, owner: str, fence: LeaseFence | None = None) -> int:
        """The learner has these entries in its own state: a restarted learner does not read them again.
        With `fence`, LeaseLost (and nothing marked) unless the learner still holds the lease."""
        if not seqs:
            return 0
        return self._queue_write(fence, lambda conn: mark_taken(conn, seqs, owner))

    def quarantine_queue_entries(self, problems: dict[int, str], *, owner: str, fence: LeaseFence | None = None) -> int:
        """Set entries the learner cannot read aside, each with the sentence saying why: taken, so they
        never block the rest, and kept for an admin to see. `fence` as for mark_queue_taken."""
        if not problems:
            return 0
        return self._queue_write(fence, lambda conn: quarantine_entries(conn, problems, owner))

    def _queue_write(self, fence: LeaseFence | None, work: Callable[[Connection], int]) -> int:
        """`work` in a write transaction that first checks `fence` (LeaseLost: nothing is written)."""
        with self._writer() as conn:
            if fence is not None:
                fence.check(conn)
            return work(conn)

    def learner_lease(self, name: str = "ttrl", ttl_s: float = DEFAULT_TTL_S,
                      clock: Callable[[], datetime] = utc_now) -> LearnerLease:
        """The lease that keeps one learner per deployment on this database (`clock`: for tests)."""
        return LearnerLease(self._engine, self._writer, name, ttl_s, clock)

    def login_failures(self) -> LoginFailures:
        """Wrong-password counts that every app process on this database shares."""
        return LoginFailures(self._engine, self._writer)

    def recorded_verdicts(self, keys: list[str], *, namespace: str) -> set[str]:
        """Which of `keys` record_verdict has applied in `namespace`."""
        check_namespace(namespace)
        found: set[str] = set()
        with self._engine.connect() as conn:
            for start in range(0, len(keys), 500):
                found.update(conn.execute(select(recorded_verdicts.c.key).where(
                    recorded_verdicts.c.namespace == namespace,
                    recorded_verdicts.c.key.in_(keys[start:start + 500]))).scalars())
        return found

    # ---- reading ----------------------------------------------------------------------------
    def get(self, memory_id: str, *, namespace: str) -> Memory:
        check_namespace(namespace)
        with self._engine.connect() as conn:
            row = self._row(conn, namespace, memory_id)
        if row is None:
            raise MemoryNotFoundError(memory_id, namespace)
        return memory_from_row(row)

    def list(self, *, namespace: str, limit: int = 100, offset: int = 0, correct: bool | None = None,
             question_type: str | None = None, modality: str | None = None, pinned: bool | None = None,
             order_by: str = "created_at", descending: bool = True) -> list[Memory]:
        """Memories of `namespace`, filtered, newest first by default. `order_by` is one of
        created_at, updated_at, win_rate, usage_count."""
        check_namespace(namespace)
        if order_by not in LIST_ORDERS:
            raise InvalidMemoryError(f"order_by {order_by!r} is unknown; use one of: {', '.join(LIST_ORDERS)}.")
        if limit < 0 or offset < 0:
            raise InvalidMemoryError(f"limit and offset must be non-negative, got {limit}, {offset}.")
        query = select(*MEMORY_COLUMNS).where(memories.c.namespace == namespace)
        if correct is not None:
            query = query.where(memories.c.correct == correct)
        if question_type is not None:
            query = query.where(memories.c.question_type == check_question_type(question_type))
        if modality is not None:
            query = query.where(memories.c.modality == modality)
        if pinned is not None:
            query = query.where(memories.c.pinned == pinned)
        key = (memories.c.success_count * 1.0 / memories.c.usage_count if order_by == "win_rate"
               else memories.c[order_by])
        query = query.order_by(key.desc() if descending else key.asc(),
                               memories.c.row_id.desc() if descending else memories.c.row_id.asc())
        with self._engine.connect() as conn:
            rows = conn.execute(query.limit(limit).offset(offset)).all()
        return [memory_from_row(row) for row in rows if row_problem(row) is None]

    def unreadable(self, *, namespace: str) -> list[UnreadableMemory]:
        """Rows of `namespace` that cannot be read as memories, and why (list, search and export
        leave them out; delete removes them)."""
        check_namespace(namespace)
        query = (select(*MEMORY_COLUMNS, func.length(memories.c.question_embedding).label("question_bytes"),
                        func.length(memories.c.caption_embedding).label("caption_bytes"))
                 .where(memories.c.namespace == namespace).order_by(memories.c.row_id))
        found = []
        with self._engine.connect() as conn:
            for row in conn.execution_options(yield_per=1000).execute(query):
                reason = row_problem(row) or vectors_problem(row.modality, row.question_bytes, row.caption_bytes)
                if reason is not None:
                    found.append(UnreadableMemory(memory_id=row.id, reason=reason))
        return found

    def count(self, *, namespace: str, correct: bool | None = None) -> int:
        check_namespace(namespace)
        query = select(func.count()).select_from(memories).where(memories.c.namespace == namespace)
        if correct is not None:
            query = query.where(memories.c.correct == correct)
        with self._engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def namespaces(self) -> list[str]:
        with self._engine.connect() as conn:
            return list(conn.execute(select(memories.c.namespace).distinct().order_by(memories.c.namespace)).scalars())

    # ---- curation (every change recorded in the history, reversible with undo) --------------
    def _change(self, memory_id: str, namespace: str, action: str, actor: str,
                mutate: Callable[[Memory], Memory | None]) -> Memory | None:
        check_namespace(namespace)

        def work(conn: Connection, stored_vectors: VectorTransaction) -> Memory | None:
            row = self._row(conn, namespace, memory_id)
            if row is None:
                raise MemoryNotFoundError(memory_id, namespace)
            if action == "delete" and row_problem(row) is not None:  # removable, though unreadable
                self._write_state(conn, stored_vectors, namespace, row, None, None)
                self._record_history(conn, memory_id, namespace, action, None, None, actor)
                return None
            before = memory_from_row(row)
            after = mutate(before)
            self._write_state(conn, stored_vectors, namespace, row, after, None)
            self._record_history(conn, memory_id, namespace, action, before, after, actor)
            return after

        return self._vectors.write(namespace, work)

    def edit(self, memory_id: str, *, namespace: str, summary: str | None = None, plan: str | None = None,
             question_type: str | None = None, actor: str = "user") -> Memory:
        """Change a memory's workflow summary, plan or question type."""
        if summary is not None:
            check_summary(summary)
        if plan is not None:
            check_text("plan", plan, allow_empty=True)
        if question_type is not None:
            check_question_type(question_type)
        changes = {name: value for name, value in
                   (("summary", summary), ("plan", plan), ("question_type", question_type)) if value is not None}
        if not changes:
            raise InvalidMemoryError("edit() needs at least one of summary, plan or question_type.")
        return self._change(memory_id, namespace, "edit", actor,
                            lambda m: replace(m, **changes, provenance={**m.provenance, "edited_by": actor},
                                              updated_at=utc_now()))

    def relabel(self, memory_id: str, *, namespace: str, correct: bool, actor: str = "user") -> Memory:
        """Mark a memory as a successful strategy (True) or a failure lesson (False)."""
        if not isinstance(correct, bool):
            raise InvalidMemoryError(f"correct must be True or False, got {correct!r}.")
        person = {"verified": True, "verdict_source": "person", "labelled_by": actor}
        return self._change(memory_id, namespace, "relabel", actor,
                            lambda m: replace(m, correct=correct, provenance={**m.provenance, **person},
                                              updated_at=utc_now()))

    def pin(self, memory_id: str, *, namespace: str, pinned: bool = True, actor: str = "user") -> Memory:
        """Pinned memories are never evicted."""
        return self._change(memory_id, namespace, "pin" if pinned else "unpin", actor,
                            lambda m: replace(m, pinned=pinned, updated_at=utc_now()))

    def delete(self, memory_id: str, *, namespace: str, actor: str = "user") -> None:
        self._change(memory_id, namespace, "delete", actor, lambda m: None)

    def history(self, memory_id: str | None = None, *, namespace: str, limit: int = 100) -> list[HistoryEntry]:
        """Recorded changes, newest first: of one memory, or of the whole namespace."""
        check_namespace(namespace)
        query = select(memory_history).where(memory_history.c.namespace == namespace)
        if memory_id is not None:
            query = query.where(memory_history.c.memory_id == memory_id)
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(memory_history.c.id.desc()).limit(limit)).all()
        return [history_entry(row) for row in rows]

    def undo(self, history_id: int, *, namespace: str, actor: str = "user") -> Memory | None:
        """Revert the change recorded as `history_id`. Fields the change did not touch keep
        their current values; usage counters are reverted by difference. Returns the memory as
        restored (None when undoing an add). The undo itself is recorded too."""
        check_namespace(namespace)
        with self._engine.connect() as conn:
            row = conn.execute(select(memory_history).where(
                memory_history.c.id == history_id, memory_history.c.namespace == namespace)).one_or_none()
        if row is None:
            raise HistoryNotFoundError(history_id, namespace)
        entry = history_entry(row)
        before, after = (self._snapshot(entry, side, namespace) for side in ("before", "after"))

        def work(conn: Connection, stored_vectors: VectorTransaction) -> Memory | None:
            current_row = self._row(conn, namespace, entry.memory_id)
            current = memory_from_row(current_row) if current_row is not None else None
            target = reverted_state(entry, before, after, current)
            text_changed = current is None or (
                target is not None and (target.question, target.caption) != (current.question, current.caption))
            vectors = self._encode(target.question, target.caption) if target is not None and text_changed else None
            row_id = self._write_state(conn, stored_vectors, namespace, current_row, target, vectors)
            self._record_history(conn, entry.memory_id, namespace, "undo", current, target, actor)
            if current is None:
                self._evict_over_capacity(conn, stored_vectors, namespace, row_id, actor)
            return target

        return self._vectors.write(namespace, work)

    @staticmethod
    def _snapshot(entry: HistoryEntry, side: str, namespace: str) -> Memory | None:
        """A history entry's before/after state as a memory of `namespace` and of the entry's memory,
        validated as a new memory is: an entry imported before imports were validated may name
        another namespace or hold values no memory may have."""
        data = getattr(entry, side)
        if data is None:
            return None
        try:
            return memory_from_record(data, namespace=namespace, now=utc_now(), memory_id=entry.memory_id,
                                      complete=True)
        except (InvalidMemoryError, KeyError, TypeError, ValueError) as exc:
            raise InvalidMemoryError(
                f"History entry {entry.id} cannot be undone: its {side!r} state is not a valid memory "
                f"({str(exc).rstrip('.')}).") from None

    # ---- export / import ----------------------------------------------------------------------
    def export_jsonl(self, namespace: str, fp: IO | str | Path, *, include_history: bool = True) -> int:
        """Write every memory of `namespace` (and its history) as JSON lines; returns the number
        of memories written."""
        check_namespace(namespace)
        written = 0

        def stored(conn: Connection):
            nonlocal written
            query = select(*MEMORY_COLUMNS).where(memories.c.namespace == namespace).order_by(memories.c.row_id)
            for row in conn.execution_options(yield_per=1000).execute(query):
                if row_problem(row) is None:  # unreadable rows are left out (MemoryStore.unreadable)
                    written += 1
                    yield memory_from_row(row)

        def changes(conn: Connection):
            if include_history:
                query = (select(memory_history).where(memory_history.c.namespace == namespace)
                         .order_by(memory_history.c.id))
                for row in conn.execution_options(yield_per=1000).execute(query):
                    yield history_entry(row)

        with self._engine.connect() as conn:  # one read transaction: a consistent snapshot
            write_export(fp, namespace, stored(conn), changes(conn))
        return written

    def existing_ids(self, namespace: str, ids: list[str]) -> set[str]:
        """Which of `ids` `namespace` already holds."""
        check_namespace(namespace)
        with self._engine.connect() as conn:
            return self._taken(conn, namespace, ids)

    @staticmethod
    def _taken(conn: Connection, namespace: str, ids: list[str]) -> set[str]:
        taken: set[str] = set()
        for start in range(0, len(ids), 500):
            taken.update(conn.execute(select(memories.c.id).where(
                memories.c.namespace == namespace, memories.c.id.in_(ids[start:start + 500]))).scalars())
        return taken

    def import_jsonl(self, namespace: str, fp: IO | str | Path, *, actor: str = "import",
                     existing: str = "refuse", max_text_chars: int | None = None) -> int:
        """Load an export into `namespace`, all or nothing: every line is validated first and
        any problem raises ImportFileError naming the line, leaving the store unchanged.
        Returns the number of memories imported (added or replaced); see import_file."""
        outcome = self.import_file(namespace, fp, actor=actor, existing=existing, max_text_chars=max_text_chars)
        return outcome.added + outcome.replaced

    def import_file(self, namespace: str, fp: IO | str | Path, *, actor: str = "import",
                    existing: str = "refuse", max_text_chars: int | None = None) -> ImportOutcome:
        """import_jsonl, saying what became of each memory. `existing` decides about a memory whose
        id the namespace already holds (importing one's own export back): "refuse" rejects the
        whole file naming its line, "skip" keeps the stored memory (and leaves out the file's
        history of it), "replace" puts the file's version in its place, recorded in the history as
        an "import" change that undo reverts. History entries the namespace already holds (same
        memory, action and time) are not added a second time; `actor` is the actor of every entry
        the file brings (transfer.imported_actor). `max_text_chars`: the longest text the file may
        hold (transfer.read_import_file)."""
        check_namespace(namespace)
        if existing not in IMPORT_EXISTING:
            raise InvalidMemoryError(f"existing must be one of {', '.join(IMPORT_EXISTING)}, got {existing!r}.")
        parsed = read_import_file(fp, namespace, importer=actor, max_text_chars=max_text_chars)
        if not parsed.memories:
            return ImportOutcome()
        ids = [m.id for m in parsed.memories]
        stored_before = self.existing_ids(namespace, ids) if existing == "skip" else set()
        wanted = [m for m in parsed.memories if m.id not in stored_before]
        texts: list[str] = []
        for memory in wanted:
            texts.append(memory.question)
            if memory.caption:
                texts.append(memory.caption)
        encoded = iter(self.embedder.encode(texts)) if texts else iter(())
        vectors = {m.id: (next(encoded), next(encoded) if m.caption else None) for m in wanted}

        def work(conn: Connection, stored_vectors: VectorTransaction) -> ImportOutcome:
            taken = self._taken(conn, namespace, ids)
            if taken and existing == "refuse":
                first = min(i for i, memory_id in enumerate(ids) if memory_id in taken)
                raise ImportFileError(parsed.line_numbers[first],
                                      f"memory id {ids[first]!r} already exists in namespace {namespace!r}")
            skipped = (taken | stored_before) if existing == "skip" else set()
            fresh = [m for m in parsed.memories if m.id not in taken and m.id not in skipped]
            outcome = ImportOutcome(skipped=len(skipped))
            if fresh:
                payload = []
                for memory in fresh:
                    question_vector, caption_vector = vectors[memory.id]
                    values = row_values(check_memory(memory, namespace))
                    values.update(self._columns.values(question_vector, caption_vector))
                    payload.append(values)
                rows = self._columns.table
                row_ids = conn.execute(insert(rows).returning(rows.c.row_id, sort_by_parameter_order=True),
                                       payload).scalars().all()
                stored_vectors.added_many(fresh, row_ids, [vectors[m.id] for m in fresh])
                outcome.added = len(fresh)
            if existing == "replace":
                for memory in parsed.memories:
                    if memory.id not in taken:
                        continue
                    row = self._row(conn, namespace, memory.id)
                    before = memory_from_row(row) if row_problem(row) is None else None
                    self._write_state(conn, stored_vectors, namespace, row, memory, vectors[memory.id])
                    self._record_history(conn, memory.id, namespace, "import", before, memory, actor)
                    outcome.replaced += 1
            history = [h for h in parsed.history if h["memory_id"] not in skipped]
            if history:
                held = self._history_keys(conn, namespace, sorted({h["memory_id"] for h in history}))
                history = [h for h in history if _history_key(h) not in held]
                if history:
                    conn.execute(insert(memory_history), history)
            outcome.history = len(history)
            self._evict_over_capacity(conn, stored_vectors, namespace, None, actor)
            return outcome

        return self._vectors.write(namespace, work)

    @staticmethod
    def _history_keys(conn: Connection, namespace: str, memory_ids: list[str]) -> set[tuple]:
        keys: set[tuple] = set()
        columns = (memory_history.c.memory_id, memory_history.c.action, memory_history.c.created_at)
        for start in range(0, len(memory_ids), 500):
            for row in conn.execute(select(*columns).where(
                    memory_history.c.namespace == namespace, memory_history.c.memory_id.in_(memory_ids[start:start + 500]))):
                keys.add(_history_key(row._mapping))
        return keys

    def close(self) -> None:
        with self._lock:
            self._vectors.close()
            self._engine.dispose()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ---- looked at by tests and benchmarks -----------------------------------------------
    @property
    def _indexes(self) -> dict[str, NamespaceIndex]:
        """The namespaces whose vectors this process holds."""
        return getattr(self._vectors, "indexes", {})

    @property
    def _database_search(self) -> DatabaseSearch | None:
        """Set when search runs in SQL."""
        return getattr(self._vectors, "database_search", None)


def _fresh_memory(new: NewMemory, modality: str, now) -> Memory:
    """A new memory as first stored: a new id and the prior counts (NEW_MEMORY_COUNTS)."""
    return Memory(
        id=str(uuid.uuid4()), namespace=new.namespace, question=new.question, caption=new.caption,
        summary=new.summary, plan=new.plan, correct=new.correct, question_type=new.question_type,
        modality=modality, usage_count=NEW_MEMORY_COUNTS[0], success_count=NEW_MEMORY_COUNTS[1],
        win_rate=NEW_MEMORY_COUNTS[1] / NEW_MEMORY_COUNTS[0], pinned=False,
        provenance=dict(new.provenance), created_at=now, updated_at=now,
    )
