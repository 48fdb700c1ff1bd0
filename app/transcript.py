"""A run's transcript: what the research page knows of one run, built event by event (live, or
reopened from the run log), for app/render_html.py to draw. The run's facts are backend.replay's
RunRecord; the transcript adds the trace's entries in order, each Executor turn as a step, the
passages retrieved, the run's state and the rough time left."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from backend.events import (
    AnswerReady, Event, ExecutorThought, HopAnswered, MemoriesRetrieved, MemoryStored, PlanReady,
    ReflectionDecided, Recovery, RunFailed, RunFinished, RunStarted, TextDelta, ToolCalled, ToolReturned,
    VerdictReady,
)
from app.image_view import image_passage
from backend.feedback_queue import FeedbackItem
from backend.labels import run_words
from backend.replay import RunRecord

STOPPED_BY_USER = "stopped by the user"  # a forced answer's reason when the person pressed Stop (backend.episode)


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


@dataclass(frozen=True)
class RunLimits:
    """What bounds a run, from the configuration: the time limit, the Executor's turns per round
    (first and supplementary) and how many reflections may replan."""

    max_seconds: float
    turns: int
    supplement_turns: int
    reflections: int

    @classmethod
    def of(cls, agent_config, executor_traits) -> RunLimits:
        return cls(max_seconds=agent_config.max_seconds, turns=agent_config.turns_for(executor_traits),
                   supplement_turns=agent_config.supplement_turns_for(executor_traits),
                   reflections=agent_config.reflections)


@dataclass
class StepView:
    """One Executor turn: its thoughts, recoveries, tool calls (each with its response once it
    came), the answers it gave, and the text being generated."""

    turn: int
    thoughts: list[str] = field(default_factory=list)
    recoveries: list[Recovery] = field(default_factory=list)
    calls: list[list] = field(default_factory=list)  # [ToolCalled, ToolReturned | None]
    answers: list[AnswerReady] = field(default_factory=list)
    draft: str = ""

    @property
    def repairs(self) -> int:
        """What went wrong in the turn: the model's output repaired, or an answer forced by a limit;
        not the guided procedure's own steps, nor a stop the person asked for."""
        return (sum(not r.routine for r in self.recoveries)
                + sum(a.forced and a.reason != STOPPED_BY_USER for a in self.answers))


class RunTranscript:
    """One run, built event by event with `add`. It keeps the run's events (no TextDelta) for the
    report."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.entries: list[tuple[str, object]] = []  # (kind, event or StepView or text), in order
        self.steps: dict[int, StepView] = {}
        self.passages: list[dict] = []
        self.run = RunRecord()  # the run's facts (backend.replay); the rest here is the page's view of them
        self.run_id: str | None = None
        self.started_at: float | None = None
        self.first_turn_at: float | None = None
        self.feedback: FeedbackItem | None = None  # a person's later verdict and right answer (History, after feedback)
        self.memory = None  # the memory this run stored, as stored now (a reopened run): its label is the run's
        self.interrupted = False  # reopened from a run log that ends before the run did, with no one running it
        self.earlier: list[list[Event]] = []  # a follow-up: the events of its thread's earlier runs, oldest first
        self._draft_step: StepView | None = None
        self._round_turns: dict[int, set[int]] = {}  # plan revision -> turns in that round

    @property
    def started(self) -> RunStarted | None:
        return self.run.started

    @property
    def answers(self) -> list[AnswerReady]:
        return self.run.answers

    @property
    def plans(self) -> list[PlanReady]:
        return self.run.plans

    @property
    def reflections(self) -> list[ReflectionDecided]:
        return self.run.reflections

    @property
    def verdict(self) -> VerdictReady | None:
        return self.run.verdict

    @property
    def memory_id(self) -> str | None:
        return self.run.memory_stored.memory_id if self.run.memory_stored is not None else None

    @property
    def finished(self) -> RunFinished | None:
        return self.run.finished

    @property
    def failure(self) -> RunFailed | None:
        return self.run.failure

    @property
    def answer(self) -> str:
        return self.run.answer

    @property
    def state(self) -> str:
        """idle | working | final | stopped | failed | unfinished"""
        if self.failure is not None:
            return "failed"
        if self.finished is not None:
            return "stopped" if self.finished.stopped else "final"
        if self.interrupted:
            return "unfinished"
        return "working" if self.events else "idle"

    @property
    def label(self) -> str | None:
        """The run's label in the words every view shows (backend.labels.run_words): its memory's, the
        person's feedback, else its verdict; None before a verdict."""
        return run_words(self.verdict, self.feedback, self.memory)

    @property
    def done(self) -> bool:
        return self.finished is not None or self.failure is not None

    def _step(self, turn: int, at: float) -> StepView:
        step = self.steps.get(turn)
        if step is None:
            step = self.steps[turn] = StepView(turn)
            self.entries.append(("step", step))
            if self.first_turn_at is None:
                self.first_turn_at = at
            revision = self.plans[-1].revision if self.plans else 0
            self._round_turns.setdefault(revision, set()).add(turn)
        return step

    def add(self, event: Event) -> None:
        self.run_id = event.run_id
        if self.started_at is None:
            self.started_at = event.at
        if isinstance(event, TextDelta):  # live text of the turn being generated; replaced by the step
            step = self._step(event.turn, event.at)
            step.draft += event.text
            self._draft_step = step
            return
        self.events.append(event)
        self.run.add(event)
        if self._draft_step is not None:
            self._draft_step.draft = ""
            self._draft_step = None
        if isinstance(event, RunStarted):
            self.started_at = event.at
            ocr = image_passage(event)  # the text OCR read in the image: a passage an answer may cite
            if ocr is not None:
                self.passages.append(ocr)
        elif isinstance(event, MemoriesRetrieved):
            self.entries.append(("memories", event))
        elif isinstance(event, PlanReady):
            self.entries.append(("plan", event))
        elif isinstance(event, ExecutorThought):
            self._step(event.turn, event.at).thoughts.append(event.text)
        elif isinstance(event, Recovery):
            self._step(event.turn, event.at).recoveries.append(event)
        elif isinstance(event, ToolCalled):
            self._step(event.turn, event.at).calls.append([event, None])
        elif isinstance(event, ToolReturned):
            step = self._step(event.turn, event.at)
            open_call = next((c for c in step.calls if c[1] is None and c[0].name == event.name), None)
            if open_call is None:
                step.calls.append([ToolCalled(event.run_id, turn=event.turn, name=event.name, arguments={}), event])
            else:
                open_call[1] = event
            self.passages.extend(event.passages)
        elif isinstance(event, AnswerReady):
            last = self.entries[-1] if self.entries else None
            if last is not None and last[0] == "step":
                last[1].answers.append(event)
            else:
                self.entries.append(("answer", event))
        elif isinstance(event, HopAnswered):
            self.entries.append(("hop", event))
        elif isinstance(event, ReflectionDecided):
            self.entries.append(("reflection", event))
        elif isinstance(event, VerdictReady):
            self.entries.append(("verdict", event))
        elif isinstance(event, MemoryStored):
            self.entries.append(("memory", event))
        elif isinstance(event, RunFinished):
            self.entries.append(("summary", event))
        elif isinstance(event, RunFailed):
            self.entries.append(("failure", event))

    def note(self, text: str, icon: str = "ℹ️") -> None:
        """A line of the app's own (not an event) at the end of the trace."""
        self.entries.append(("note", (icon, text)))

    # -- the rough time left ----------------------------------------------------------------------
    def eta_text(self, limits: RunLimits | None, now: float | None = None) -> str:
        """A rough estimate of the time left, from the configured limits and the run so far: mean
        seconds per Executor step so far × the steps the round may still take (plus the reflection
        and the verdict), capped by the time limit. '' once the run is over."""
        if limits is None or self.done or self.started_at is None:
            return ""
        now = time.time() if now is None else now
        elapsed = max(0.0, now - self.started_at)
        time_left = max(0.0, limits.max_seconds - elapsed)
        cap = f"the time limit ends it within {_duration(time_left)}"
        if self.first_turn_at is None:
            return f"Rough estimate: no step has run yet, so no pace to go by; {cap}."
        turns_begun = len(self.steps)
        per_step = elapsed / max(turns_begun, 1)  # planning included: rough, and never 0 as a step begins
        revision = self.plans[-1].revision if self.plans else 0
        round_cap = limits.turns if revision == 0 else limits.supplement_turns
        in_round = len(self._round_turns.get(revision, ()))
        answered = bool(self.answers) and (not self.plans or self.answers[-1].at >= self.plans[-1].at)
        steps_left = 0 if answered else max(0, round_cap - in_round)
        rounds_left = max(0, limits.reflections - len(self.reflections))
        after = (1 if rounds_left else 0) + 1  # a reflection (when one may come), then the verdict and memory
        eta = min(per_step * (steps_left + after), time_left)
        more = (f"up to {steps_left} more step{'s' if steps_left != 1 else ''} of {round_cap}, then "
                if steps_left else "")
        then = "reflection and the verdict" if rounds_left else "the verdict"
        return (f"About {_duration(eta)} left (rough: {per_step:.0f} s per step so far, {more}{then}; {cap}).")
