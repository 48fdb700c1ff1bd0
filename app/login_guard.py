"""Sign-in for shared demos: repeated wrong passwords lock a user name and an address for a while.

After `free_failures` failures for one user name (or one address), further attempts fail at once,
even with the right password, for `base_lock_s` seconds, doubling with each further failure up to
`max_lock_s`. A success clears the user name's and the address's failures. (UserDirectory.check
itself takes as long for an unknown user as for a known one.) Gradio hands the login check only a
user name and a password, so `ClientAddress` (ASGI middleware) passes the address along.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.auth import UserDirectory

log = logging.getLogger(__name__)

CLIENT_ADDRESS: contextvars.ContextVar[str] = contextvars.ContextVar("mia_client_address", default="unknown")
MAX_TRACKED_KEYS = 100_000  # beyond this, keys that are no longer locked are forgotten


@dataclass
class _Failures:
    count: int = 0
    locked_until: float = 0.0
    last: float = 0.0


class LoginThrottle:
    def __init__(self, *, free_failures: int, base_lock_s: float = 30.0, max_lock_s: float = 900.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.free_failures, self.base_lock_s, self.max_lock_s = free_failures, base_lock_s, max_lock_s
        self._clock = clock
        self._failures: dict[str, _Failures] = {}
        self._lock = threading.Lock()

    def locked_for(self, key: str) -> float:
        """Seconds until `key` may try again (0: it may now)."""
        with self._lock:
            entry = self._failures.get(key)
            return max(0.0, entry.locked_until - self._clock()) if entry else 0.0

    def record_failure(self, key: str) -> None:
        now = self._clock()
        with self._lock:
            if len(self._failures) >= MAX_TRACKED_KEYS:
                self._forget_unlocked(now)
            entry = self._failures.setdefault(key, _Failures())
            if entry.last and now - entry.last > self.max_lock_s:  # a quiet spell starts the count afresh
                entry.count = 0
            entry.count += 1
            entry.last = now
            extra = entry.count - self.free_failures
            if extra >= 0:
                entry.locked_until = now + min(self.max_lock_s, self.base_lock_s * 2 ** min(extra, 30))

    def clear(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def _forget_unlocked(self, now: float) -> None:
        for key in [k for k, e in self._failures.items() if e.locked_until <= now]:
            del self._failures[key]


class LoginGuard:
    """The callable Gradio's `auth=` gets: UserDirectory.check behind a throttle per user and address."""

    def __init__(self, users: UserDirectory, *, per_user: LoginThrottle | None = None,
                 per_address: LoginThrottle | None = None) -> None:
        self.users = users
        self.per_user = per_user or LoginThrottle(free_failures=5)
        # An address may be shared (an office, a proxy): it gets more tries than one user name.
        self.per_address = per_address or LoginThrottle(free_failures=20)

    def __call__(self, username: str, password: str) -> bool:
        address = CLIENT_ADDRESS.get()
        user_key, address_key = f"user:{username.strip().lower()}", f"address:{address}"
        if self.per_user.locked_for(user_key) or self.per_address.locked_for(address_key):
            log.warning("sign-in for %r from %s refused: too many wrong passwords", username[:64], address)
            return False
        if self.users.check(username, password):
            self.per_user.clear(user_key)
            self.per_address.clear(address_key)
            return True
        self.per_user.record_failure(user_key)
        self.per_address.record_failure(address_key)
        return False


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
