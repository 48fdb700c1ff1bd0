"""One learner per deployment: a lease row in the database, held by a heartbeat.

The learner acquires the lease at start and renews it every few seconds; a lease whose heartbeat is
older than its time-to-live is free again (its holder crashed or was killed), so a restarted worker
takes over. The same row carries what the learner publishes for the app's Learning view (`status`)
and what the app asks of the learner: `paused`, and `yield_until` while users' questions run.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, insert, select, update
from sqlalchemy.exc import IntegrityError

from .errors import MemoryStoreError
from .rows import from_db_time, to_db_time, utc_now
from .schema import learner_leases

DEFAULT_TTL_S = 60.0


class LeaseHeld(MemoryStoreError):
    """Another live learner holds the lease; the message names it."""

    def __init__(self, state: "LeaseState") -> None:
        age = state.heartbeat_age_s()
        super().__init__(
            f"Another learner ({state.owner}) holds the lock of this deployment (its last heartbeat was "
            f"{age:.0f} s ago); one learner runs per deployment. Stop it first, or wait until its lock "
            "expires if it died."
        )
        self.state = state


@dataclass(frozen=True)
class LeaseState:
    name: str
    owner: str | None
    heartbeat_at: datetime | None
    paused: bool
    yield_until: datetime | None
    status: dict = field(default_factory=dict)
    ttl_s: float = DEFAULT_TTL_S

    def heartbeat_age_s(self, now: datetime | None = None) -> float:
        if self.heartbeat_at is None:
            return float("inf")
        return ((now or utc_now()) - self.heartbeat_at).total_seconds()

    @property
    def alive(self) -> bool:
        """Whether a learner holds the lease and renewed it within its time-to-live."""
        return self.owner is not None and self.heartbeat_age_s() <= self.ttl_s

    @property
    def users_active(self) -> bool:
        return self.yield_until is not None and self.yield_until > utc_now()


class LearnerLease:
    """The lease named `name` on the store's database (`writer` opens a write transaction)."""

    def __init__(self, engine: Engine, writer: Callable, name: str = "ttrl", ttl_s: float = DEFAULT_TTL_S) -> None:
        if not name or len(name) > 64:
            raise MemoryStoreError(f"A lease name is 1-64 characters, got {name!r}.")
        self._engine, self._writer, self.name, self.ttl_s = engine, writer, name, ttl_s

    def _state(self, row) -> LeaseState:
        if row is None:
            return LeaseState(self.name, None, None, False, None, {}, self.ttl_s)
        try:
            status = json.loads(row.status) if row.status else {}
        except ValueError:
            status = {}
        return LeaseState(
            self.name, row.owner, from_db_time(row.heartbeat_at) if row.heartbeat_at else None, bool(row.paused),
            from_db_time(row.yield_until) if row.yield_until else None, status if isinstance(status, dict) else {},
            self.ttl_s,
        )

    def _locked_row(self, conn: Connection):
        """The lease's row, locked for this transaction (created when missing)."""
        query = select(learner_leases).where(learner_leases.c.name == self.name).with_for_update()
        row = conn.execute(query).first()
        if row is None:
            try:
                with conn.begin_nested():
                    conn.execute(insert(learner_leases), {"name": self.name, "paused": False})
            except IntegrityError:  # another process created it meanwhile
                pass
            row = conn.execute(query).first()
        return row

    def read(self) -> LeaseState:
        with self._engine.connect() as conn:
            row = conn.execute(select(learner_leases).where(learner_leases.c.name == self.name)).first()
        return self._state(row)

    def acquire(self, owner: str, *, holder_is_gone: Callable[[str], bool] | None = None) -> LeaseState:
        """Take the lease for `owner`; raises LeaseHeld when another live learner has it.
        `holder_is_gone(holder)`: whether a holder whose heartbeat is still fresh is known to be dead
        (a process of this machine that no longer exists), so its lease need not expire first."""
        with self._writer() as conn:
            state = self._state(self._locked_row(conn))
            if state.alive and state.owner != owner and not (holder_is_gone and holder_is_gone(state.owner)):
                raise LeaseHeld(state)
            conn.execute(update(learner_leases).where(learner_leases.c.name == self.name)
                         .values(owner=owner[:200], heartbeat_at=to_db_time(utc_now())))
        return self.read()

    def heartbeat(self, owner: str, status: dict | None = None) -> LeaseState | None:
        """Renew the lease and publish `status`; None when `owner` no longer holds it (it expired and
        another learner took it: stop working)."""
        with self._writer() as conn:
            state = self._state(self._locked_row(conn))
            if state.owner != owner:
                return None
            values = {"heartbeat_at": to_db_time(utc_now())}
            if status is not None:
                values["status"] = json.dumps(status, ensure_ascii=False, default=str)
            conn.execute(update(learner_leases).where(learner_leases.c.name == self.name).values(**values))
        return self.read()

    def release(self, owner: str) -> None:
        with self._writer() as conn:
            conn.execute(update(learner_leases)
                         .where(learner_leases.c.name == self.name, learner_leases.c.owner == owner)
                         .values(owner=None, heartbeat_at=None))

    def _update(self, **values) -> None:
        with self._writer() as conn:
            self._locked_row(conn)
            conn.execute(update(learner_leases).where(learner_leases.c.name == self.name).values(**values))

    def set_paused(self, paused: bool) -> None:
        self._update(paused=bool(paused))

    def users_active_for(self, seconds: float) -> None:
        """Ask the learner to yield for the next `seconds` (a user's question is running); never
        shortens an earlier request."""
        until = to_db_time(utc_now() + timedelta(seconds=seconds))
        with self._writer() as conn:
            row = self._locked_row(conn)
            if row.yield_until is None or row.yield_until < until:
                conn.execute(update(learner_leases).where(learner_leases.c.name == self.name).values(yield_until=until))

    def users_done(self) -> None:
        """This process's users' questions ended: the learner may go on (another process's running
        question renews its notice within seconds)."""
        self._update(yield_until=None)
