"""The write path every change of a memory takes: its row, its history entry, its vectors, and
eviction down to the namespace's capacity."""
from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Connection, delete, func, select, update

from .errors import CapacityError
from .lifecycle import eviction_order
from .records import Memory
from .rows import MEMORY_COLUMNS, memory_from_row, row_problem, row_values, to_db_time, utc_now
from .schema import memories, memory_history
from .store_base import StoreBase
from .validation import check_memory
from .vector_backend import VectorTransaction


class MemoryWrites(StoreBase):
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
