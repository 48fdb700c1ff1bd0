"""Stop strings on a growing text: where to cut, and how much may safely be shown while streaming."""

from __future__ import annotations

from collections.abc import Sequence


def find_stop(text: str, stops: Sequence[str], start: int = 0) -> int | None:
    """Index of the earliest stop string in `text` (searching from `start`), or None."""
    positions = [index for stop in stops if stop and (index := text.find(stop, start)) != -1]
    return min(positions) if positions else None


def safe_prefix_length(text: str, stops: Sequence[str]) -> int:
    """How much of `text` can be shown now: everything but a tail that might grow into a stop string."""
    held_back = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), held_back, -1):
            if text.endswith(stop[:size]):
                held_back = size
                break
    return len(text) - held_back
