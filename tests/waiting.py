"""Waiting in a test for what another thread or process does: poll with a deadline and fail naming
what did not happen, instead of sleeping a guessed time or spinning forever."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], seconds: float, what: str, *, every: float = 0.1) -> T:
    """The first truthy value of `condition()`, asked every `every` seconds; AssertionError after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {seconds:g} s for {what}")
        time.sleep(every)
