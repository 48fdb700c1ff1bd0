"""The learner's work: one unit at a time (`work_once`: take the queue's new entries, process the oldest
pending signal if the hourly budget allows, update the Planner when the batch is full), run by the
app's background thread (`start`) or by a worker process (training.ttrl.worker)."""

from __future__ import annotations

import logging
import threading
import time

from memory_db import LeaseLost
from training.ttrl.learner_intake import _about_a_run, _lesson, _run_key
from training.ttrl.learner_policy import UNLOADABLE_RETRY_S, PlannerUnavailable
from training.ttrl.memory_fit import NotEnoughMemory

# The learner's one logger, whichever of its modules logs (as in worker.log: "training.ttrl.learner: ...").
log = logging.getLogger("training.ttrl.learner")


class LearnerLoop:
    """TestTimeLearner's background thread and its unit of work."""

    @property
    def running(self) -> bool:
        """Whether the background worker is alive (start() was called and it has not stopped)."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="test-time-learning", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                outcome = self.work_once()
            except Exception as exc:  # e.g. an unreadable queue: keep the app up, say why, retry later
                log.exception("test-time learning worker")
                self.last_error = f"{type(exc).__name__}: {exc}"
                outcome = "idle"
            if outcome in ("idle", "paused", "budget", "memory", "blocked"):
                self._wake.wait(self.settings.poll_seconds)
                self._wake.clear()

    def work_once(self) -> str:
        """One unit of work: 'paused', 'idle', 'budget' (waiting for the hourly budget), 'memory'
        (waiting for the memory its weights need; the signal stays pending), 'blocked' (the Planner
        could not be loaded; the signal stays pending) or 'processed'."""
        if self.paused or not self.settings.enabled:
            self.activity = "paused" if self.paused else "switched off"
            return "paused"
        self.poll_feedback()
        n = 0 if self.settings.learner == "rft" else self.settings.rollouts_per_signal
        with self._lock:
            if not self.pending:
                self.activity = "idle"
                return "idle"
            if not self.budget.allows(n):
                wait = self.budget.seconds_until(n)
                self.activity = f"waiting {wait / 60:.0f} min for the hourly rollout budget"
                return "budget"
            signal = self.pending[0]
        if self._unloadable is not None:
            version, failed_at = self._unloadable
            if self.versions.current().number == version and time.time() - failed_at < UNLOADABLE_RETRY_S:
                return "blocked"  # the error is recorded; loading it again would fail the same way
            self._unloadable = None
        try:
            self.process(signal)
        except LeaseLost:
            raise
        except PlannerUnavailable as exc:  # the learner's Planner, not the signal: it stays pending
            self._unloadable = (self.versions.current().number, time.time())
            self.last_error = str(exc)
            self.activity = "waiting for a Planner version that loads"
            self._log("signals.jsonl", {"at": time.time(), "question": signal.question, "namespace": signal.namespace,
                                        "kind": signal.kind, "source": signal.source, "waits": True,
                                        "error": f"{exc} (the signal waits)"})
            return "blocked"
        except NotEnoughMemory as exc:  # the machine, not the signal: it waits, and learning tries again
            self.last_error = f"{exc} The signal waits; learning tries again every {self.settings.poll_seconds:.0f} s."
            self.activity = "waiting for the free memory learning needs"
            return "memory"
        except Exception as exc:  # one bad signal must not stop learning; it is logged and dropped
            log.exception("test-time learning failed on %r", signal.question)
            self.last_error = f"{type(exc).__name__}: {exc} (question: {signal.question[:80]!r}; skipped)"
            self._log("signals.jsonl", {"at": time.time(), "question": signal.question, "namespace": signal.namespace,
                                        "kind": signal.kind, "source": signal.source, "error": self.last_error})
        with self._lock:
            if self.pending and self.pending[0] is signal:
                self.pending.pop(0)
            if _about_a_run(signal):
                self.learned_from[_run_key(signal)] = _lesson(signal)
            self._save_state()
        if len(self.batch) >= self.settings.signals_per_update:
            try:
                self.update()
            except LeaseLost:
                raise
            except Exception as exc:  # e.g. a full disk: stop learning rather than retry forever
                log.exception("test-time learning update failed")
                self.last_error = (f"The Planner update failed ({type(exc).__name__}: {exc}); learning is paused. "
                                   "Fix the cause, then resume from the Learning view.")
                self.pause()
        self.activity = "idle"
        return "processed"
