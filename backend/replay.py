"""A run rebuilt from its events (live, or loaded from the run log): the one place that reads a
run's event stream back into facts. The evaluation rows, feedback on a past run, the training
datasets, the History list and the research page all read runs through `RunRecord`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from backend.events import (
    AnswerReady,
    Event,
    HopAnswered,
    MemoriesRetrieved,
    MemoryStored,
    PlanReady,
    ReflectionDecided,
    RunFailed,
    RunFinished,
    RunStarted,
    StepTaken,
    ToolCalled,
    ToolReturned,
    VerdictReady,
)
from backend.executor import Step


@dataclass
class RunRecord:
    run_id: str = ""
    started: RunStarted | None = None
    memories: MemoriesRetrieved | None = None
    plans: list[PlanReady] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    answers: list[AnswerReady] = field(default_factory=list)
    hops: list[HopAnswered] = field(default_factory=list)  # a plan of sub-questions, each hop as researched (a redo again)
    reflections: list[ReflectionDecided] = field(default_factory=list)
    verdict: VerdictReady | None = None
    memory_stored: MemoryStored | None = None
    finished: RunFinished | None = None
    failure: RunFailed | None = None
    first_round_answers: int | None = None  # answers given before the first replan (None: no replan)
    tool_calls: list[ToolCalled] = field(default_factory=list)
    tool_results: list[ToolReturned] = field(default_factory=list)

    @property
    def search_queries(self) -> list[str]:
        """The queries the run's query tools were given, in order."""
        return [query for call in self.tool_calls for value in call.arguments.values() if isinstance(value, list)
                for query in value if isinstance(query, str)]

    @property
    def retrieved_passages(self) -> list[dict]:
        return [passage for result in self.tool_results for passage in result.passages]

    @property
    def question(self) -> str:
        return self.started.question if self.started else ""

    @property
    def first_answer(self) -> str:
        """The answer before any replan (the last one the first round gave)."""
        first_round = self.answers if self.first_round_answers is None else self.answers[: self.first_round_answers]
        return first_round[-1].text if first_round else ""

    @property
    def answer(self) -> str:
        if self.finished is not None:
            return self.finished.answer
        return self.answers[-1].text if self.answers else ""

    @property
    def first_answer_seconds(self) -> float | None:
        """How long after the run started its first answer was shown (None: no answer)."""
        if self.started is None or not self.answers:
            return None
        return round(self.answers[0].at - self.started.at, 3)

    @property
    def last_answer_event(self) -> AnswerReady | None:
        return self.answers[-1] if self.answers else None

    @property
    def memories_used(self) -> list[str]:
        return [m["id"] for m in self.memories.successful + self.memories.failed] if self.memories else []

    @property
    def replanned(self) -> bool:
        return any(p.revision > 0 for p in self.plans)

    @property
    def failed(self) -> bool:
        return self.failure is not None or self.finished is None

    def add(self, event: Event) -> None:
        """One more event of the run (a run's page builds its record as the events arrive)."""
        self.run_id = self.run_id or event.run_id
        if isinstance(event, RunStarted):
            self.started = event
        elif isinstance(event, MemoriesRetrieved):
            self.memories = event
        elif isinstance(event, PlanReady):
            self.plans.append(event)
            if event.revision > 0 and self.first_round_answers is None:
                self.first_round_answers = len(self.answers)
        elif isinstance(event, StepTaken):
            self.steps.append(Step(**event.step))
        elif isinstance(event, AnswerReady):
            self.answers.append(event)
        elif isinstance(event, HopAnswered):
            self.hops.append(event)
        elif isinstance(event, ReflectionDecided):
            self.reflections.append(event)
        elif isinstance(event, VerdictReady):
            self.verdict = event
        elif isinstance(event, MemoryStored):
            self.memory_stored = event
        elif isinstance(event, RunFinished):
            self.finished = event
        elif isinstance(event, RunFailed):
            self.failure = event
        elif isinstance(event, ToolCalled):
            self.tool_calls.append(event)
        elif isinstance(event, ToolReturned):
            self.tool_results.append(event)


def replay(events: Iterable[Event]) -> RunRecord:
    record = RunRecord()
    for event in events:
        record.add(event)
    return record


