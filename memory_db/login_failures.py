"""Wrong-password counts in the database, shared by every app process of a deployment.

A sign-in throttle (app/login_guard.py) keeps, per key ("user:NAME", "address:IP"), how many wrong
passwords it has seen, until when the key is locked, and when the count lapses. Kept here, a lock
earned against one app process holds in all of them. Times are seconds since the epoch, as the
throttle's clock gives them: every process reads the same wall clock.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from .errors import MemoryStoreError
from .schema import login_failures

MAX_KEY_LENGTH = 200


@dataclass(frozen=True)
class FailureCount:
    failures: int
    locked_until: float  # the key may try again from this time on
    expires_at: float  # from this time on the count is as good as none (a quiet spell starts afresh)


class LoginFailures:
    """The failure counts on the store's database (`writer` opens a write transaction)."""

    def __init__(self, engine: Engine, writer: Callable) -> None:
        self._engine, self._writer = engine, writer

    @staticmethod
    def _checked(key: str) -> str:
        if not key or len(key) > MAX_KEY_LENGTH:
            raise MemoryStoreError(f"A sign-in key is 1-{MAX_KEY_LENGTH} characters, got {len(key)}.")
        return key

    @staticmethod
    def _count(row, now: float) -> FailureCount | None:
        if row is None or row.expires_at <= now:
            return None
        return FailureCount(row.failures, row.locked_until, row.expires_at)

    def read(self, key: str, now: float) -> FailureCount | None:
        """`key`'s count, or None when it has none that still counts at `now`."""
        with self._engine.connect() as conn:
            row = conn.execute(select(login_failures).where(login_failures.c.key == self._checked(key))).first()
        return self._count(row, now)

    def change(self, key: str, now: float, update_count: Callable[[FailureCount | None], FailureCount]) -> FailureCount:
        """Replace `key`'s count with `update_count(current count)` in one write transaction; the key's
        row stays locked until it commits, so processes counting the same key take turns."""
        key = self._checked(key)
        with self._writer() as conn:
            counted = update_count(self._count(self._locked_row(conn, key), now))
            conn.execute(update(login_failures).where(login_failures.c.key == key).values(
                failures=counted.failures, locked_until=counted.locked_until, expires_at=counted.expires_at))
        return counted

    def _locked_row(self, conn: Connection, key: str):
        query = select(login_failures).where(login_failures.c.key == key).with_for_update()
        row = conn.execute(query).first()
        if row is None:
            try:
                with conn.begin_nested():
                    conn.execute(insert(login_failures), {"key": key, "failures": 0, "locked_until": 0.0,
                                                          "expires_at": 0.0})
            except IntegrityError:  # another process counted the same key meanwhile
                pass
            row = conn.execute(query).first()
        return row

    def clear(self, key: str) -> None:
        with self._writer() as conn:
            conn.execute(delete(login_failures).where(login_failures.c.key == self._checked(key)))

    def forget_expired(self, now: float) -> int:
        """Delete the counts that no longer count; returns how many."""
        with self._writer() as conn:
            return conn.execute(delete(login_failures).where(login_failures.c.expires_at <= now)).rowcount
