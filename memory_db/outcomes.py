"""What finished runs teach the memories: the outcome of every memory a run used, and the verdict
on a run (applied at most once per key)."""
from __future__ import annotations

from dataclasses import replace

from sqlalchemy import Connection, select, update

from .errors import InvalidMemoryError, MemoryNotFoundError
from .memory_writes import MemoryWrites
from .rows import memory_from_row, row_problem, to_db_time, utc_now
from .schema import memories, recorded_verdicts
from .validation import check_namespace, check_text
from .vector_backend import VectorTransaction


class Outcomes(MemoryWrites):
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
