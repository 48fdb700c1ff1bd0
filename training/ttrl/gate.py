"""The learner gives way to users: before each model call it waits while a user's question runs.

App processes write "users active until T" into the learner's lease row (memory_db.lease) as their
runs go; the learner's models, wrapped in GatedModel, check it (at most once a second) before every
call and sleep while it holds. On a 2-core machine this keeps rollouts and canary questions off the
CPU while someone waits for an answer; a call already under way finishes first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class YieldGate:
    """`users_active()` says whether to wait; it is asked at most every `check_s` seconds of `clock`."""

    def __init__(self, users_active: Callable[[], bool], *, check_s: float = 1.0,
                 stopped: threading.Event | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._users_active, self.check_s, self._clock = users_active, check_s, clock
        self._stopped = stopped or threading.Event()
        self._checked_at = float("-inf")
        self._active = False
        self._waited_s = 0.0
        self._waiting_since: float | None = None
        self.waits = 0

    def active(self) -> bool:
        now = self._clock()
        if now - self._checked_at >= self.check_s:
            self._checked_at = now
            try:
                self._active = bool(self._users_active())
            except Exception:  # the database is briefly unreachable: do not block learning on it
                self._active = False
        return self._active

    @property
    def waited_s(self) -> float:
        """How long the learner has given way, in all (a wait under way included)."""
        ongoing = self._clock() - self._waiting_since if self._waiting_since is not None else 0.0
        return self._waited_s + ongoing

    def wait(self) -> None:
        """Return once no user's question runs (or the worker is stopping)."""
        if not self.active():
            return
        self._waiting_since = self._clock()
        self.waits += 1
        try:
            while self.active() and not self._stopped.is_set():
                self._stopped.wait(self.check_s)
        finally:
            self._waited_s += self._clock() - self._waiting_since
            self._waiting_since = None


class GatedModel:
    """A ChatModel that waits at the gate before each call; everything else is the model's."""

    def __init__(self, model, gate: YieldGate) -> None:
        self._model, self._gate = model, gate

    def generate(self, messages, **kwargs):
        self._gate.wait()
        return self._model.generate(messages, **kwargs)

    def stream(self, messages, **kwargs):
        self._gate.wait()
        yield from self._model.stream(messages, **kwargs)

    def choose(self, messages, options, **kwargs):
        self._gate.wait()
        return self._model.choose(messages, options, **kwargs)

    def __getattr__(self, name):
        return getattr(self._model, name)
