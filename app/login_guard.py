"""Sign-in for shared demos: repeated wrong passwords lock a user name and an address for a while.

After `free_failures` failures for one user name (or one address), further attempts fail at once,
even with the right password, for `base_lock_s` seconds, doubling with each further failure up to
`max_lock_s`. A success clears the user name's failures, never the address's: an attacker who has
an account of their own must not wipe the record of their guesses by signing in between them.
(UserDirectory.check itself takes as long for an unknown user as for a known one.)

The counts live in the memory store's database when the app serves (memory_db.login_failures), so
that every app process of a deployment holds the same locks; FailureCountsInProcess keeps them in
one process. A password check (scrypt: tens of milliseconds of a core) runs in a worker thread,
PASSWORD_CHECKS_AT_ONCE at a time: a flood of sign-ins queues for that, while the server's event
loop, and everyone's pages, go on. Each user name queues first on its own: at most one sign-in per
user name waits for a check, so one account signing in over and over delays another account's
sign-in by one check at most, not by the whole flood. Gradio hands the login check only a user name
and a password, so `ClientAddress` (ASGI middleware) passes the address along.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

import anyio

from app.auth import UserDirectory
from memory_db.login_failures import FailureCount

log = logging.getLogger(__name__)

CLIENT_ADDRESS: contextvars.ContextVar[str] = contextvars.ContextVar("mia_client_address", default="unknown")
MAX_TRACKED_KEYS = 100_000  # in one process; beyond this, keys that are no longer locked are forgotten
FORGET_EXPIRED_EVERY_S = 60.0
PASSWORD_CHECKS_AT_ONCE = 1  # scrypt checks running together; the rest of the cores stay with the app
MAX_NAME_CHARS = 100  # of a user name in a key (user names are at most 64; anything longer is nobody's)


class FailureCounts(Protocol):
    """Where a LoginThrottle keeps its counts (memory_db.login_failures.LoginFailures, or one process)."""

    def read(self, key: str, now: float) -> FailureCount | None: ...

    def change(self, key: str, now: float,
               update_count: Callable[[FailureCount | None], FailureCount]) -> FailureCount: ...

    def clear(self, key: str) -> None: ...

    def forget_expired(self, now: float) -> int: ...


class FailureCountsInProcess:
    """The counts in this process alone."""

    def __init__(self) -> None:
        self._counts: dict[str, FailureCount] = {}
        self._lock = threading.Lock()

    def read(self, key: str, now: float) -> FailureCount | None:
        with self._lock:
            count = self._counts.get(key)
        return count if count is not None and count.expires_at > now else None

    def change(self, key: str, now: float, update_count: Callable[[FailureCount | None], FailureCount]) -> FailureCount:
        with self._lock:
            if key not in self._counts and len(self._counts) >= MAX_TRACKED_KEYS:
                for unlocked in [k for k, c in self._counts.items() if c.locked_until <= now]:
                    del self._counts[unlocked]
            current = self._counts.get(key)
            counted = update_count(current if current is not None and current.expires_at > now else None)
            self._counts[key] = counted
        return counted

    def clear(self, key: str) -> None:
        with self._lock:
            self._counts.pop(key, None)

    def forget_expired(self, now: float) -> int:
        with self._lock:
            expired = [k for k, c in self._counts.items() if c.expires_at <= now]
            for key in expired:
                del self._counts[key]
        return len(expired)


class LoginThrottle:
    def __init__(self, *, free_failures: int, base_lock_s: float = 30.0, max_lock_s: float = 900.0,
                 clock: Callable[[], float] = time.time, counts: FailureCounts | None = None) -> None:
        """`clock`: seconds since the epoch (every process sharing `counts` must read the same clock)."""
        self.free_failures, self.base_lock_s, self.max_lock_s = free_failures, base_lock_s, max_lock_s
        self._clock = clock
        self.counts = counts if counts is not None else FailureCountsInProcess()
        self._forgotten_at = clock()

    def locked_for(self, key: str) -> float:
        """Seconds until `key` may try again (0: it may now)."""
        now = self._clock()
        count = self.counts.read(key, now)
        return max(0.0, count.locked_until - now) if count else 0.0

    def record_failure(self, key: str) -> None:
        now = self._clock()

        def counted(current: FailureCount | None) -> FailureCount:
            # no count (or one older than max_lock_s: a quiet spell) starts afresh
            failures = (current.failures if current else 0) + 1
            locked_until = current.locked_until if current else 0.0
            extra = failures - self.free_failures
            if extra >= 0:
                locked_until = now + min(self.max_lock_s, self.base_lock_s * 2 ** min(extra, 30))
            return FailureCount(failures, locked_until, expires_at=now + self.max_lock_s)

        self.counts.change(key, now, counted)
        if now - self._forgotten_at >= FORGET_EXPIRED_EVERY_S:
            self._forgotten_at = now
            self.counts.forget_expired(now)

    def clear(self, key: str) -> None:
        self.counts.clear(key)


class LoginGuard:
    """UserDirectory.check behind a throttle per user name and per address. Gradio's `auth=` gets
    `authenticate` (a coroutine function, which Gradio's login route awaits)."""

    def __init__(self, users: UserDirectory, *, per_user: LoginThrottle | None = None,
                 per_address: LoginThrottle | None = None, counts: FailureCounts | None = None,
                 checks_at_once: int = PASSWORD_CHECKS_AT_ONCE) -> None:
        """`counts`: where both default throttles keep their counts (default: this process)."""
        self.users = users
        self.per_user = per_user or LoginThrottle(free_failures=5, counts=counts)
        # An address may be shared (an office, a proxy): it gets more tries than one user name.
        self.per_address = per_address or LoginThrottle(free_failures=20, counts=counts)
        self._checks = anyio.CapacityLimiter(checks_at_once)
        self._turns: dict[str, tuple[anyio.Lock, int]] = {}  # user key -> (its queue, sign-ins in it)

    async def authenticate(self, username: str, password: str) -> bool:
        """`check` for the address of the request being served, in a worker thread once this user
        name's earlier sign-ins are done and one of the PASSWORD_CHECKS_AT_ONCE is free; waiting
        costs the event loop nothing."""
        key = user_key(username)
        lock, waiting = self._turns.get(key) or (anyio.Lock(), 0)
        self._turns[key] = (lock, waiting + 1)
        try:
            async with lock:
                return await anyio.to_thread.run_sync(self.check, username, password, CLIENT_ADDRESS.get(),
                                                      limiter=self._checks)
        finally:
            lock, waiting = self._turns[key]
            if waiting == 1:  # the last one out: a name no one signs in with holds no memory
                del self._turns[key]
            else:
                self._turns[key] = (lock, waiting - 1)

    def check(self, username: str, password: str, address: str) -> bool:
        name_key = user_key(username)
        address_key = f"address:{address}"
        if self.per_user.locked_for(name_key) or self.per_address.locked_for(address_key):
            log.warning("sign-in for %r from %s refused: too many wrong passwords", username[:64], address)
            return False
        if self.users.check(username, password):
            self.per_user.clear(name_key)
            return True
        self.per_user.record_failure(name_key)
        self.per_address.record_failure(address_key)
        return False


def user_key(username: str) -> str:
    """The key of a user name's failures and of its queue of sign-ins."""
    return f"user:{username.strip().lower()[:MAX_NAME_CHARS]}"


class ClientAddress:
    """ASGI middleware: the client's address, for the login check of the same request."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("client"):
            token = CLIENT_ADDRESS.set(scope["client"][0])
            try:
                return await self.app(scope, receive, send)
            finally:
                CLIENT_ADDRESS.reset(token)
        return await self.app(scope, receive, send)
