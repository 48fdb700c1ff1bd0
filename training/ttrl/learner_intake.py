"""How the learner takes signals in: the learning queue's new entries (people's feedback, questions to
learn from) and signals submitted directly become pending signals, one per run; an entry that cannot
be read is quarantined (see training.ttrl.learner)."""

from __future__ import annotations

import logging

from training.ttrl.signals import Signal, queued_signals, signal_of_entry

# The learner's one logger, whichever of its modules logs (as in worker.log: "training.ttrl.learner: ...").
log = logging.getLogger("training.ttrl.learner")

QUARANTINE_SHOWN = 3  # quarantined queue entries the status names (newest first)


def _run_key(signal: Signal) -> str:
    """Which run a signal is about (one signal per run)."""
    return f"{signal.namespace}|{signal.source}"


def _about_a_run(signal: Signal) -> bool:
    """Signals from the app name their run (feedback:, ground_truth:, unsupervised:); a stream's are each their own."""
    return not signal.source.startswith("stream:")


def _lesson(signal: Signal) -> str:
    """What the signal teaches, to tell a repeated thumb from a correction."""
    return f"{signal.kind}:{signal.answer}"


def quarantine_note(count: int, newest_problems: list[str]) -> str:
    """The sentence the Learning view shows about quarantined queue entries ("" when there are none)."""
    if not count:
        return ""
    more = f"; and {count - len(newest_problems)} more" if count > len(newest_problems) else ""
    return f"{count} queue row{'s' if count != 1 else ''} quarantined: {'; '.join(newest_problems)}{more}"


class SignalIntake:
    """TestTimeLearner's pending signals: what is queued, and how the queue's entries join them."""

    def submit(self, signal: Signal) -> int:
        """Queue a signal (an evaluation stream's gold answer, an unsupervised run); returns pending count."""
        with self._lock:
            self.pending.append(signal)
            self._save_state()
            self._wake.set()
            return len(self.pending)

    def pending_count(self, namespace: str | None = None) -> int:
        """Signals waiting for rollouts (of one namespace): pending here, and queued entries not yet taken."""
        with self._lock:
            waiting = sum(1 for s in self.pending if namespace in (None, s.namespace))
        if self.feedback_queue is not None:
            waiting += queued_signals(self.feedback_queue, namespace)
        return waiting

    def poll_feedback(self) -> int:
        """Take the queue's new entries into pending signals; returns how many became signals. The
        signals are saved before their entries are marked taken (see training.ttrl.learner); an
        entry that cannot be read is quarantined with its reason."""
        if self.feedback_queue is None:
            return 0
        entries = self.feedback_queue.untaken()
        if not entries:
            return 0
        signals, problems = [], {}
        for entry in entries:
            try:
                signal = signal_of_entry(entry)
            except ValueError as problem:
                log.warning("learning-queue entry %s is quarantined (kept in the queue, never read again): %s",
                            entry.seq, problem)
                problems[entry.seq] = str(problem)
                continue
            if signal is not None:
                signals.append(signal)
        with self._lock:
            for signal in signals:
                self._add_pending(signal)
            self._save_state()
        if problems:
            self.feedback_queue.quarantine(problems, self.owner, self.fence)
            self.quarantined = self._quarantine_note()
        self.feedback_queue.mark_taken([e.seq for e in entries if e.seq not in problems], self.owner, self.fence)
        return len(signals)

    def _quarantine_note(self) -> str:
        if self.feedback_queue is None:
            return ""
        newest = self.feedback_queue.quarantined(limit=QUARANTINE_SHOWN)
        return quarantine_note(self.feedback_queue.quarantined_count(), [e.quarantine for e in newest])

    def _add_pending(self, signal: Signal) -> None:
        """One signal per run: later feedback on a run whose signal waits replaces it (the latest word
        wins), and a signal repeating what the run already taught is dropped."""
        if not _about_a_run(signal):
            self.pending.append(signal)
            return
        key = (signal.namespace, signal.source)
        waiting = next((i for i, s in enumerate(self.pending) if (s.namespace, s.source) == key), None)
        if waiting is not None:
            self.pending[waiting] = signal
        elif self.learned_from.get(_run_key(signal)) != _lesson(signal):
            self.pending.append(signal)
