"""A user's reading slots (backend.documents.store): at most `documents.reads_per_user` files read at
once per user, the others waiting in arrival order, so one user's large files never take every
reading process while other users' requests wait."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ReadTurns:
    """A user's reading slots: at most `slots` reads at once, the others wait in arrival order."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._changed = threading.Condition()
        self._queue: list[object] = []  # the waiting, in arrival order
        self._reading = 0

    @contextmanager
    def turn(self, on_wait) -> Iterator[None]:
        """Waits for a slot, calling `on_wait(reads ahead of this one)` when it must wait and whenever
        its place changes."""
        me = object()
        with self._changed:
            self._queue.append(me)
            told = None
            while self._queue[0] is not me or self._reading >= self.slots:
                ahead = self._queue.index(me) + self._reading
                if ahead != told:
                    on_wait(ahead)
                    told = ahead
                self._changed.wait()
            self._queue.pop(0)
            self._reading += 1
            self._changed.notify_all()  # the next in line starts too while slots remain
        try:
            yield
        finally:
            with self._changed:
                self._reading -= 1
                self._changed.notify_all()
