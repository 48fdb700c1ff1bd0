"""Adding memories: a repeat of a stored question replaces it or is dropped, a near-duplicate naming
the same things is merged into it, and the namespace is trimmed to capacity."""
from __future__ import annotations

import uuid
from dataclasses import replace

import numpy as np
from sqlalchemy import Connection, select

from .lifecycle import (EXACT_DUPLICATE_SIMILARITY, NEW_MEMORY_COUNTS, is_verified, new_is_better,
                        replaces_exact_duplicate, with_outcome)
from .memory_writes import MemoryWrites
from .named_things import name_the_same_things
from .records import Memory, NewMemory, modality_for
from .rows import MEMORY_COLUMNS, memory_from_row, row_problem, row_values, to_db_time, utc_now
from .schema import memories, memory_history
from .scoring import CAPTION_WEIGHT
from .validation import check_memory, check_new_memory
from .vector_backend import Nearest, VectorTransaction


class Adding(MemoryWrites):
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
        # An unreadable row is no duplicate, nor is a question about other things, however similar
        # ("Super Bowl XLIX" beside "Super Bowl XLVIII"): a person's answer to one must not land on the other.
        if (existing_row is not None and row_problem(existing_row) is None
                and name_the_same_things(existing_row.question, new.question)):
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


def _fresh_memory(new: NewMemory, modality: str, now) -> Memory:
    """A new memory as first stored: a new id and the prior counts (NEW_MEMORY_COUNTS)."""
    return Memory(
        id=str(uuid.uuid4()), namespace=new.namespace, question=new.question, caption=new.caption,
        summary=new.summary, plan=new.plan, correct=new.correct, question_type=new.question_type,
        modality=modality, usage_count=NEW_MEMORY_COUNTS[0], success_count=NEW_MEMORY_COUNTS[1],
        win_rate=NEW_MEMORY_COUNTS[1] / NEW_MEMORY_COUNTS[0], pinned=False,
        provenance=dict(new.provenance), created_at=now, updated_at=now,
    )
