"""Counting what a run costs: LLM calls, tokens and time, per role and in total."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from backend.llm.base import ChatModel, Choice, Completion
from backend.llm.decoding import STOP_POLL_SECONDS, stopping_when


@dataclass
class RunMeter:
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    llm_seconds: float = 0.0
    tool_calls: int = 0
    tool_seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    per_role_calls: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_llm(self, role: str, seconds: float, prompt_tokens: int = 0, completion_tokens: int = 0,
                cached_tokens: int = 0) -> None:
        with self._lock:
            self.llm_calls += 1
            self.prompt_tokens += prompt_tokens
            self.cached_prompt_tokens += cached_tokens
            self.completion_tokens += completion_tokens
            self.llm_seconds += seconds
            self.per_role_calls[role] = self.per_role_calls.get(role, 0) + 1

    def add_tool(self, seconds: float) -> None:
        with self._lock:
            self.tool_calls += 1
            self.tool_seconds += seconds

    def snapshot(self) -> dict[str, float]:
        wall = time.perf_counter() - self.started
        return {
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "tool_calls": self.tool_calls,
            "wall_seconds": round(wall, 3),
            "llm_seconds": round(self.llm_seconds, 3),
            "tool_seconds": round(self.tool_seconds, 3),
            "other_seconds": round(max(0.0, wall - self.llm_seconds - self.tool_seconds), 3),
            **{f"calls_{role}": n for role, n in self.per_role_calls.items()},
        }


class StopRequested(Exception):
    """The person who asked stopped the run; raised before the next model call."""


class MeteredModel:
    """A ChatModel that records every call in a RunMeter under a role name. With `stop_requested`,
    a call made after the run was stopped raises StopRequested instead of reaching the model, and a
    call under way when it is stopped is left at once (a local model's decoding stops at its next
    token; a choice finishes on its own thread, unread) and raises StopRequested."""

    def __init__(self, model: ChatModel, meter: RunMeter, role: str, stop_requested: Callable[[], bool] | None = None) -> None:
        self.model, self.meter, self.role = model, meter, role
        self.stop_requested = stop_requested
        self.name = model.name
        self.supports_images = model.supports_images
        self.traits = model.traits

    def _check_stop(self) -> None:
        if self.stop_requested is not None and self.stop_requested():
            raise StopRequested

    def generate(self, messages: list[dict], **kwargs) -> Completion:
        self._check_stop()
        with stopping_when(self.stop_requested):
            completion = self.model.generate(messages, **kwargs)
        self.meter.add_llm(self.role, completion.seconds, completion.prompt_tokens, completion.completion_tokens,
                           completion.cached_tokens)
        self._check_stop()  # a call cut short by Stop holds no usable text
        return completion

    def stream(self, messages: list[dict], **kwargs) -> Iterator[str | Completion]:
        self._check_stop()
        items = iter(self.model.stream(messages, **kwargs))
        while True:
            with stopping_when(self.stop_requested):  # around each step: the consumer reads it while it waits
                item = next(items, None)
            if item is None:
                return
            if isinstance(item, Completion):
                self.meter.add_llm(self.role, item.seconds, item.prompt_tokens, item.completion_tokens,
                                   item.cached_tokens)
                self._check_stop()
            yield item

    def choose(self, messages: list[dict], options: Sequence[str], **kwargs) -> Choice:
        self._check_stop()
        start = time.perf_counter()
        choice = (self.model.choose(messages, options, **kwargs) if self.stop_requested is None
                  else self._choose_until_stopped(messages, options, kwargs))
        self.meter.add_llm(self.role, time.perf_counter() - start)
        return choice

    def _choose_until_stopped(self, messages: list[dict], options: Sequence[str], kwargs: dict) -> Choice:
        """The choice made on a thread of its own while this one watches for Stop: scoring the options
        reads the whole prompt, which no token boundary interrupts."""
        outcome: list = []
        done = threading.Event()

        def choose() -> None:
            try:
                outcome.append(self.model.choose(messages, options, **kwargs))
            except BaseException as exc:  # raised again in the caller
                outcome.append(exc)
            finally:
                done.set()

        threading.Thread(target=choose, name=f"choose-{self.role}", daemon=True).start()
        while not done.wait(STOP_POLL_SECONDS):
            self._check_stop()
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)
