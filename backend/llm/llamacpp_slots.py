"""The llama.cpp model's slots and its turns at the CPU (backend.llm.llamacpp).

A slot is one llama.cpp context over the shared model, with its own KV cache. A call takes the free
slot whose cached tokens share the longest prefix with its prompt, so it pays only for the tokens
after that prefix; one more caller than slots waits for the first to finish. Each decode step passes
a first-come gate that lets as many steps compute at once as the cores hold, so several users' calls
interleave step by step instead of oversubscribing the cores.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence

from backend.llm.base import LLMError

USEFUL_PREFIX_TOKENS = 64  # a shorter shared prefix is only the chat template's opening
IDLE_CACHE_SECONDS = 120.0  # a cache unused this long belongs to a finished question


class Slot:
    """One llama.cpp context over the shared model: its KV cache holds `tokens`."""

    def __init__(self, context, batch) -> None:
        self.context, self.batch = context, batch
        self.tokens: list[int] = []
        self.reused = 0  # prompt tokens the last prompt found in this cache
        self.last_used = 0.0

    def keep_value(self, now: float) -> int:
        """What evicting this cache would cost: its tokens, or nothing once it has sat idle a while."""
        return len(self.tokens) if now - self.last_used < IDLE_CACHE_SECONDS else 0


class SlotPool:
    def __init__(self, slots: list[Slot]) -> None:
        self._free = list(slots)
        self._size = len(slots)
        self._ready = threading.Condition()
        self.closed_because = ""  # set by close_all: what a caller is told instead of a slot

    def acquire(self, prompt_ids: list[int]) -> Slot:
        """The free slot whose cache shares the longest prefix with `prompt_ids` (waits for one). A
        prompt that continues no cache (a reader or Planner prompt between an Executor's turns) takes
        the slot that is cheapest to lose, so the Executor's conversation stays cached."""
        with self._ready:
            while not self._free and not self.closed_because:
                self._ready.wait()
            if self.closed_because:
                raise LLMError(self.closed_because)
            now = time.monotonic()
            shared = {id(slot): common_prefix(slot.tokens, prompt_ids) for slot in self._free}
            best = max(self._free, key=lambda slot: shared[id(slot)])
            if shared[id(best)] < USEFUL_PREFIX_TOKENS:
                best = min(self._free, key=lambda slot: slot.keep_value(now))
            self._free.remove(best)
            return best

    def release(self, slot: Slot) -> None:
        with self._ready:
            slot.last_used = time.monotonic()
            self._free.append(slot)
            self._ready.notify()

    def close_all(self, reason: str) -> None:
        """Wait until every slot is back (no call is decoding in one), then refuse further calls."""
        with self._ready:
            while len(self._free) < self._size:
                self._ready.wait()
            self._free = []
            self.closed_because = reason
            self._ready.notify_all()


class ComputeGate:
    """At most `width` holders at once, admitted in the order they asked. A plain semaphore lets the
    thread that just released take it straight back, so one user's token loop would starve the rest."""

    def __init__(self, width: int) -> None:
        self._free = width
        self._waiting: deque[threading.Event] = deque()
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            turn = threading.Event()
            self._waiting.append(turn)
        turn.wait()  # the releasing holder handed its place to this waiter

    def __exit__(self, *exc) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._free += 1


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
