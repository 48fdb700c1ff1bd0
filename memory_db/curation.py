"""A person's changes to a memory: edit, relabel, pin, delete; each recorded in the history."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import Connection

from .errors import InvalidMemoryError, MemoryNotFoundError
from .memory_writes import MemoryWrites
from .provenance import provenance_update
from .records import Memory
from .rows import memory_from_row, row_problem, utc_now
from .validation import check_namespace, check_question_type, check_summary, check_text
from .vector_backend import VectorTransaction


class Curation(MemoryWrites):
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
                            lambda m: replace(m, **changes, provenance={**m.provenance, **provenance_update(edited_by=actor)},
                                              updated_at=utc_now()))

    def relabel(self, memory_id: str, *, namespace: str, correct: bool, actor: str = "user") -> Memory:
        """Mark a memory as a successful strategy (True) or a failure lesson (False)."""
        if not isinstance(correct, bool):
            raise InvalidMemoryError(f"correct must be True or False, got {correct!r}.")
        person = provenance_update(verified=True, verdict_source="person", labelled_by=actor)
        return self._change(memory_id, namespace, "relabel", actor,
                            lambda m: replace(m, correct=correct, provenance={**m.provenance, **person},
                                              updated_at=utc_now()))

    def pin(self, memory_id: str, *, namespace: str, pinned: bool = True, actor: str = "user") -> Memory:
        """Pinned memories are never evicted."""
        return self._change(memory_id, namespace, "pin" if pinned else "unpin", actor,
                            lambda m: replace(m, pinned=pinned, updated_at=utc_now()))

    def delete(self, memory_id: str, *, namespace: str, actor: str = "user") -> None:
        self._change(memory_id, namespace, "delete", actor, lambda m: None)
