"""Reading memories back: one by id, a filtered page, the count, and the rows that cannot be read."""
from __future__ import annotations

from sqlalchemy import func, select

from .errors import InvalidMemoryError, MemoryNotFoundError
from .records import Memory, UnreadableMemory
from .rows import MEMORY_COLUMNS, memory_from_row, row_problem, vectors_problem
from .schema import memories
from .store_base import StoreBase
from .validation import check_namespace, check_question_type

LIST_ORDERS = ("created_at", "updated_at", "win_rate", "usage_count")


class Reading(StoreBase):
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
