"""One learner per deployment: a lease row in the database, held by a heartbeat.

The learner acquires the lease at start and renews it every few seconds; a lease whose heartbeat is
older than its time-to-live is free again (its holder crashed or was killed), so a restarted worker
takes over. The same row carries what the learner publishes for the app's Learning view (`status`)
and what the app asks of the learner: `paused`, and `yield_until` while users' questions run.

A holder that stalls past its time-to-live (a paused process, a long swap) may wake up after another
learner took over. So every acquire counts the row's fencing token up, and the holder's writes check
the token it got (a LeaseFence) in the transaction that writes: the queue's rows, the status it
publishes, and, inside `LeaseFence.holding()`, the renames of its files. A stale holder is refused
(LeaseLost) before it writes anything.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


class LeaseLost(MemoryStoreError):
    """Another learner acquired the lease since this one did: this one stops without writing."""


@dataclass(frozen=True)
class LeaseState:
    name: str
    owner: str | None
    heartbeat_at: datetime | None
    paused: bool
    yield_until: datetime | None
    status: dict = field(default_factory=dict)
    ttl_s: float = DEFAULT_TTL_S
    fence_token: int = 0
    read_at: datetime = field(default_factory=utc_now)  # by the lease's clock

    def heartbeat_age_s(self) -> float:
        if self.heartbeat_at is None:
            return float("inf")
        return (self.read_at - self.heartbeat_at).total_seconds()

    @property
    def alive(self) -> bool:
        """Whether a learner holds the lease and renewed it within its time-to-live."""
        return self.owner is not None and self.heartbeat_age_s() <= self.ttl_s

    @property
    def users_active(self) -> bool:
        return self.yield_until is not None and self.yield_until > self.read_at


@dataclass(frozen=True)
class LeaseFence:
    """What an acquire gives its holder: the owner and the fencing token it was given. The holder's
    writes go through `check` (in the transaction that writes) or `holding()`."""

    lease: LearnerLease
    owner: str
    token: int

    def check(self, conn: Connection) -> None:
        """LeaseLost unless the lease still carries this holder's token. The row stays locked until
        the transaction ends (PostgreSQL: FOR UPDATE; SQLite: the writer holds the database's write
        lock), so no acquire can slip in before this transaction's writes commit."""
        row = conn.execute(select(learner_leases.c.owner, learner_leases.c.fence_token)
                           .where(learner_leases.c.name == self.lease.name).with_for_update()).first()
        if row is None or row.owner != self.owner or row.fence_token != self.token:
            holder = f"{row.owner} (token {row.fence_token})" if row is not None and row.owner else "nobody"
            raise LeaseLost(
                f"The learner lease of this deployment is held by {holder}, no longer by {self.owner} "
                f"(token {self.token}): this learner missed its heartbeats, so it stops without writing."
            )

    def verify(self) -> None:
        """LeaseLost unless the lease is this holder's now (a write after this check may still race a
        newer holder: `holding()` closes that window)."""
        with self.holding():
            pass

    @contextmanager
    def holding(self) -> Iterator[Connection]:
        """A write transaction in which the lease is this holder's: what runs inside (a file's rename)
        cannot race a newer holder, whose acquire waits for this transaction to end."""
        with self.lease._writer() as conn:
            self.check(conn)
            yield conn


class LearnerLease:
    """The lease named `name` on the store's database (`writer` opens a write transaction); `clock`
    tells the time heartbeats and expiry are measured by."""

    def __init__(self, engine: Engine, writer: Callable, name: str = "ttrl", ttl_s: float = DEFAULT_TTL_S,
                 clock: Callable[[], datetime] = utc_now) -> None:
        if not name or len(name) > 64:
            raise MemoryStoreError(f"A lease name is 1-64 characters, got {name!r}.")
        self._engine, self._writer, self.name, self.ttl_s, self._clock = engine, writer, name, ttl_s, clock

    def _state(self, row) -> LeaseState:
        if row is None:
            return LeaseState(self.name, None, None, False, None, {}, self.ttl_s, 0, self._clock())
        try:
            status = json.loads(row.status) if row.status else {}
        except ValueError:
            status = {}
        return LeaseState(
            self.name, row.owner, from_db_time(row.heartbeat_at) if row.heartbeat_at else None, bool(row.paused),
            from_db_time(row.yield_until) if row.yield_until else None, status if isinstance(status, dict) else {},
            self.ttl_s, row.fence_token, self._clock(),
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

    def acquire(self, owner: str, *, holder_is_gone: Callable[[str], bool] | None = None) -> LeaseFence:
        """Take the lease for `owner` with the next fencing token; raises LeaseHeld when another live
        learner has it. `holder_is_gone(holder)`: whether a holder whose heartbeat is still fresh is
        known to be dead (a process of this machine that no longer exists), so its lease need not
        expire first."""
        owner = owner[:200]
        with self._writer() as conn:
            state = self._state(self._locked_row(conn))
            if state.alive and state.owner != owner and not (holder_is_gone and holder_is_gone(state.owner)):
                raise LeaseHeld(state)
            token = state.fence_token + 1
            conn.execute(update(learner_leases).where(learner_leases.c.name == self.name)
                         .values(owner=owner, heartbeat_at=to_db_time(self._clock()), fence_token=token))
        return LeaseFence(self, owner, token)

    def heartbeat(self, fence: LeaseFence, status: dict | None = None) -> LeaseState | None:
        """Renew the lease and publish `status`; None when `fence` is stale (the lease expired and
        another learner took it: stop working)."""
        with self._writer() as conn:
            try:
                fence.check(conn)
            except LeaseLost:
                return None
            values = {"heartbeat_at": to_db_time(self._clock())}
            if status is not None:
                values["status"] = json.dumps(status, ensure_ascii=False, default=str)
            conn.execute(update(learner_leases).where(learner_leases.c.name == self.name).values(**values))
        return self.read()

    def release(self, fence: LeaseFence) -> None:
        """Give the lease up, if `fence` still holds it."""
        with self._writer() as conn:
            conn.execute(update(learner_leases)
                         .where(learner_leases.c.name == self.name, learner_leases.c.owner == fence.owner,
                                learner_leases.c.fence_token == fence.token)
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
        until = to_db_time(self._clock() + timedelta(seconds=seconds))
        with self._writer() as conn:
            row = self._locked_row(conn)
            if row.yield_until is None or row.yield_until < until:
                conn.execute(update(learner_leases).where(learner_leases.c.name == self.name).values(yield_until=until))

    def users_done(self) -> None:
        """This process's users' questions ended: the learner may go on (another process's running
        question renews its notice within seconds)."""
        self._update(yield_until=None)
