"""The store's side of test-time learning: the queue of feedback and signals (memory_db.learning_queue)
and the lease that keeps one learner per deployment (memory_db.lease)."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Connection

from .learning_queue import (QueueEntry, check_entry, count_entries, insert_entry, mark_taken,
                             quarantine_entries, read_entries)
from .lease import DEFAULT_TTL_S, LearnerLease, LeaseFence
from .outcomes import Outcomes
from .rows import utc_now
from .validation import check_namespace
from .vector_backend import VectorTransaction


class QueueAndLease(Outcomes):
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
