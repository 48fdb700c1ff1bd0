"""What every local backend does around its token loop: turn tokens into streamed text with stop
strings, and run the loop on a thread of its own so that a stream never holds the model.

A local model is shared by every user and role, so decoding holds a lock (or a context slot). A
generator must never hold it across a `yield`: a consumer may stop iterating (a closed browser
tab) or resume on another thread (the web server moves a stream between worker threads), and the
lock would stay taken for everyone. So a producer thread decodes and hands pieces over a queue;
when the consumer stops, the producer is told to stop after the current token.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from backend.llm.base import Completion, TokenLogprob
from backend.llm.stop_strings import find_stop, safe_prefix_length

Emit = Callable[[str], None]

# Whether the run making the call now was stopped (a person's Stop): set by backend.metering around a
# call, read by the consumer while it waits for the producer. A token of a 1.5B model on two busy
# cores, or a long prompt read in chunks, takes seconds; waiting for the turn to end kept Stop 13.6 s
# from the page, so the consumer leaves at once and the producer stops at its next token.
_STOP_CHECK: ContextVar[Callable[[], bool] | None] = ContextVar("stop_check", default=None)
STOP_POLL_SECONDS = 0.1


@contextmanager
def stopping_when(check: Callable[[], bool] | None):
    """Within this block, a local model's call ends (finish_reason "cancelled") soon after `check()` is true."""
    token = _STOP_CHECK.set(check)
    try:
        yield
    finally:
        _STOP_CHECK.reset(token)


@dataclass
class DecodedText:
    text: str
    finish_reason: str  # "stop" | "length" | "cancelled"
    produced: int  # tokens generated, the turn-ending one included
    details: list[TokenLogprob] = field(default_factory=list)


def collect_text(
    tokens: Iterable[tuple[int, TokenLogprob | None]],
    *,
    decode: Callable[[list[int]], str],
    end_ids: set[int] | Callable[[int], bool],
    stops: Sequence[str],
    emit: Emit,
    cancelled: threading.Event,
) -> DecodedText:
    """Consume (token id, detail) pairs until a turn-ending token, a stop string, cancellation or the
    end of the budget; emit the text as it becomes safe to show (never a partial stop string or a
    half-decoded character)."""
    if cancelled.is_set():  # stopped while waiting for the model: the prompt is not even read
        return DecodedText(text="", finish_reason="cancelled", produced=0)
    is_end = end_ids if callable(end_ids) else end_ids.__contains__
    ids: list[int] = []
    details: list[TokenLogprob] = []
    text, shown, finish, produced = "", 0, "length", 0
    for token_id, detail in tokens:
        produced += 1
        if is_end(token_id):
            finish = "stop"
            break
        ids.append(token_id)
        if detail is not None:
            details.append(detail)
        text = decode(ids)
        cut = find_stop(text, stops)
        if cut is not None:
            text, finish = text[:cut], "stop"
            break
        if cancelled.is_set():
            finish = "cancelled"
            break
        if text.endswith("\ufffd"):
            continue  # a multi-byte character is still incomplete: show it once whole
        visible = safe_prefix_length(text, stops)
        if visible > shown:
            emit(text[shown:visible])
            shown = visible
    if len(text) > shown:
        emit(text[shown:])
    return DecodedText(text=text, finish_reason=finish, produced=produced, details=details)


def stream_in_thread(produce: Callable[[Emit, threading.Event], Completion], name: str) -> Iterator[str | Completion]:
    """Run `produce(emit, cancelled)` on its own thread; yield what it emits, then its Completion.
    An exception in the producer is raised here, in the consumer."""
    pieces: queue.Queue = queue.Queue()
    cancelled = threading.Event()

    def run() -> None:
        try:
            pieces.put(produce(pieces.put, cancelled))
        except BaseException as exc:  # handed to the consumer, raised there
            pieces.put(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    started, shown = time.perf_counter(), []
    try:
        while True:
            stop = _STOP_CHECK.get()
            if stop is not None and stop():  # checked before every piece: a fast stream may never leave a gap
                cancelled.set()
                yield Completion(text="".join(shown), prompt_tokens=0, completion_tokens=0,
                                 seconds=time.perf_counter() - started, finish_reason="cancelled")
                return
            try:
                item = pieces.get(timeout=STOP_POLL_SECONDS if stop is not None else None)
            except queue.Empty:
                continue
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, str):
                shown.append(item)
            yield item
            if isinstance(item, Completion):
                return
    finally:
        cancelled.set()
