"""A namespace written to and loaded from an export file (the file's format: memory_db.transfer)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO

from sqlalchemy import Connection, insert, select

from .errors import ImportFileError, InvalidMemoryError
from .history import history_entry
from .memory_writes import MemoryWrites
from .rows import MEMORY_COLUMNS, memory_from_row, row_problem, row_values, to_db_time
from .schema import memories, memory_history
from .transfer import read_import_file, write_export
from .validation import check_memory, check_namespace
from .vector_backend import VectorTransaction

IMPORT_EXISTING = ("refuse", "skip", "replace")  # what an import does with an id the namespace holds


@dataclass
class ImportOutcome:
    """What an import did: memories added, replaced (same id, the file's version) and skipped
    (same id, the stored one kept), and history entries added."""

    added: int = 0
    replaced: int = 0
    skipped: int = 0
    history: int = 0


class ImportExport(MemoryWrites):
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


def _history_key(entry) -> tuple:
    """What makes two history entries the same change (an export imported back holds them again);
    not the actor, which an import makes the importer."""
    created = entry["created_at"]
    created = to_db_time(created) if created.tzinfo is not None else created
    return entry["memory_id"], entry["action"], created
