"""A sliding one-hour budget of rollouts, so a busy demo cannot queue unbounded learning work."""

from __future__ import annotations

import time
from collections.abc import Callable

HOUR = 3600.0


class RolloutBudget:
    def __init__(self, per_hour: int, *, clock: Callable[[], float] = time.time, spent: list[float] | None = None) -> None:
        self.per_hour = per_hour
        self.clock = clock
        self._spent = list(spent or [])

    def _trim(self) -> None:
        horizon = self.clock() - HOUR
        self._spent = [t for t in self._spent if t > horizon]

    def left(self) -> int:
        self._trim()
        return max(0, self.per_hour - len(self._spent))

    def allows(self, rollouts: int) -> bool:
        return self.left() >= rollouts

    def spend(self, rollouts: int) -> None:
        now = self.clock()
        self._spent.extend([now] * rollouts)

    def seconds_until(self, rollouts: int) -> float:
        """How long until `rollouts` fit in the window (0 if they fit now)."""
        self._trim()
        excess = len(self._spent) + rollouts - self.per_hour
        if excess <= 0:
            return 0.0
        return max(0.0, sorted(self._spent)[excess - 1] + HOUR - self.clock())

    def spent_times(self) -> list[float]:
        self._trim()
        return list(self._spent)
