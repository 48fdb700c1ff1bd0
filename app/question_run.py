"""A question's run for a page of the research view: the agent's events folded into the page's
transcript (QuestionRun), the run each page has under way with its Stop switch (ActiveRuns), the run
each page shows for its citations (ShownRuns), and the limits a run starts with."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator

import gradio as gr

from app.learning_signals import queue_for_learning
from app.render_html import TranscriptPage
from app.session import AppContext
from app.transcript import RunLimits, RunTranscript
from backend.agent import RunRequest
from backend.events import RunFinished, TextDelta

log = logging.getLogger(__name__)


def session_of(request: gr.Request | None) -> str:
    """The page (Gradio session) a request comes from."""
    return str(getattr(request, "session_hash", None) or "no-session")


def run_limits(ctx: AppContext) -> RunLimits:
    """The limits a run starts with (the Executor's traits may change with Settings)."""
    return RunLimits.of(ctx.runtime.config.agent, ctx.runtime.agent.models["executor"].traits)


class ActiveRuns:
    """The run each page (Gradio session) has under way, with its Stop switch: a page runs one
    question at a time, and Stop ends that page's run only."""

    def __init__(self) -> None:
        self._runs: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def begin(self, session: str) -> threading.Event | None:
        """A fresh Stop switch for the page's new run; None when the page has one under way."""
        with self._lock:
            if session in self._runs:
                return None
            stop = self._runs[session] = threading.Event()
            return stop

    def end(self, session: str, stop: threading.Event) -> None:
        with self._lock:
            if self._runs.get(session) is stop:
                del self._runs[session]

    def stop(self, session: str) -> bool:
        with self._lock:
            stop = self._runs.get(session)
        if stop is None:
            return False
        stop.set()
        return True

    def running(self, session: str) -> bool:
        with self._lock:
            return session in self._runs


class ShownRuns:
    """The run each page (Gradio session) shows, so that a citation clicked on it opens from the
    server's own copy of the run, live or reopened; the oldest pages are forgotten first."""

    def __init__(self, size: int = 256) -> None:
        self._runs: OrderedDict[str, RunTranscript] = OrderedDict()
        self._lock = threading.Lock()
        self._size = size

    def show(self, session: str, transcript: RunTranscript) -> None:
        with self._lock:
            self._runs[session] = transcript
            self._runs.move_to_end(session)
            while len(self._runs) > self._size:
                self._runs.popitem(last=False)

    def get(self, session: str, run_id: str) -> RunTranscript | None:
        with self._lock:
            transcript = self._runs.get(session)
        return transcript if transcript is not None and transcript.run_id == run_id else None


DELTA_INTERVAL_S = 0.3  # streamed text updates the page at most this often


class QuestionRun:
    """One question run for a page: the agent's events folded into a transcript, the run marked
    under way in this app while it goes, a finished run queued for test-time learning. When the page
    goes away mid-run, `finish_in_background` lets the run end in a thread, into the run log, so
    History shows it with its answer and verdict."""

    def __init__(self, ctx: AppContext, request: RunRequest, stop: threading.Event) -> None:
        self.ctx, self.request, self.stop = ctx, request, stop
        self.transcript = TranscriptPage()
        self.finished = False
        self.ended = threading.Event()  # set once the run is over, on the page or in the background
        self._events = ctx.agent.run(request, stop_requested=stop.is_set)

    def take(self, event) -> None:
        self.transcript.add(event)
        self.ctx.runs_under_way.add(event.run_id)
        self.finished = self.finished or isinstance(event, RunFinished)

    def follow(self) -> Iterator[TranscriptPage]:
        """The transcript after each event (streamed text at most every DELTA_INTERVAL_S); the
        learner gives way meanwhile. Closed early (the page went away), the run goes on in the background."""
        shown_at = 0.0
        try:
            with self.ctx.question_running() as still_running:
                for event in self._events:
                    still_running()
                    self.take(event)
                    if isinstance(event, TextDelta) and time.monotonic() - shown_at < DELTA_INTERVAL_S:
                        continue
                    shown_at = time.monotonic()
                    yield self.transcript
        except GeneratorExit:
            self.finish_in_background()
            raise
        except Exception:
            self.end()
            raise
        self.end()

    def finish_in_background(self) -> None:
        """The page closed mid-run: the run goes on in a thread. Beyond RUNS_AT_ONCE such runs at once
        it is stopped instead (it ends at its next model call, with the answer so far)."""
        slot = self.ctx.background_runs.acquire(blocking=False)
        if not slot:
            self.stop.set()
        threading.Thread(target=self._finish, args=(slot,), name="finish-closed-page-run", daemon=True).start()

    def _finish(self, slot: bool) -> None:
        try:
            with self.ctx.question_running() as still_running:
                for event in self._events:
                    still_running()
                    self.take(event)
        except Exception:  # the agent reports its own errors as events; this is a last guard
            log.exception("run %s failed after its page closed", self.transcript.run_id)
        finally:
            if slot:
                self.ctx.background_runs.release()
            self.end()

    def end(self) -> None:
        """The run is over: queued for learning when it qualifies, no longer under way."""
        try:
            queued = queue_for_learning(self.ctx, self.transcript, self.request.question, self.request.namespace,
                                        finished=self.finished, ground_truth=self.request.ground_truth,
                                        image=self.request.image)
            if queued:
                self.transcript.note(queued, "🎓")
        finally:
            self.ctx.runs_under_way.discard(self.transcript.run_id)
            self.ended.set()
