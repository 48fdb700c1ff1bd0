"""The typed events of one research run.

`backend.agent.ResearchAgent.run` yields these; the web UI, the command line, the run log and the
tests all consume the same stream. Each event is plain data and round-trips through JSON.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass
class Event:
    kind: ClassVar[str] = "event"
    # Fields added after logs were first written, left out while None: such an event is logged as before them.
    later_fields: ClassVar[tuple[str, ...]] = ()
    run_id: str
    at: float = field(default_factory=time.time, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        data = {"kind": self.kind, **asdict(self)}
        for name in self.later_fields:
            if data[name] is None:
                del data[name]
        return data


@dataclass
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    later_fields: ClassVar[tuple[str, ...]] = ("image_text", "follow_up")
    question: str
    namespace: str
    image: str | None = None
    caption: str | None = None
    caption_source: str | None = None  # "user" | "image-search" | "vision-model" | None, "+ocr" when OCR read text
    ground_truth: str | None = None
    image_text: str | None = None  # the text OCR read in the image (neutralised, capped); None: none read, or an older log
    # A follow-up (backend.follow_up.FollowUpContext.to_dict): its thread, the run it follows, the question as the person
    # typed it, how it was read with the thread, and the earlier passages reused; None: a question of its own
    follow_up: dict | None = None


@dataclass
class MemoriesRetrieved(Event):
    """Contrastive memories handed to the Planner: each item is a plain dict
    (id, question, summary, correct, win_rate, similarity, score)."""

    kind: ClassVar[str] = "memories"
    later_fields: ClassVar[tuple[str, ...]] = ("near_taught",)
    successful: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    taught: dict | None = None  # a person's answer to this question or a rewording (backend.taught.TaughtAnswer)
    # Without `taught`: the most similar question a person taught that is not this one (its TaughtAnswer
    # fields and "why": the names that tell them apart), researched, not answered from (backend.taught.near_note)
    near_taught: dict | None = None


@dataclass
class PlanReady(Event):
    kind: ClassVar[str] = "plan"
    later_fields: ClassVar[tuple[str, ...]] = ("chosen", "source", "drafted")
    text: str
    steps: list[str]
    revision: int = 0  # 0 = the first blueprint, 1.. = supplementary plans after reflection
    recovered: str | None = None  # set when the model's text gave no steps and a recovery was used
    planner_model: str = ""  # which model wrote it (the Manager's while memory is sparse)
    chosen: str | None = None  # why this plan and not the Planner's (a document matches the question); None: the Planner's
    source: str | None = None  # "person": the person reviewed it before it ran and it was researched as written; None: the Planner's
    drafted: list[str] | None = None  # a person's plan: the Planner's draft it was made from (the same steps when kept as drafted)


@dataclass
class ExecutorThought(Event):
    kind: ClassVar[str] = "thought"
    later_fields: ClassVar[tuple[str, ...]] = ("draft",)
    turn: int
    text: str
    draft: str | None = None  # the answer drafted so far, when the thought is about a draft no result states yet


@dataclass
class TextDelta(Event):
    """A piece of an Executor turn as it is generated (for live display; not kept in the run log)."""

    kind: ClassVar[str] = "delta"
    turn: int
    text: str


@dataclass
class ToolCalled(Event):
    kind: ClassVar[str] = "tool_call"
    turn: int
    name: str
    arguments: dict


@dataclass
class ToolReturned(Event):
    kind: ClassVar[str] = "tool_response"
    turn: int
    name: str
    ok: bool
    content: str
    passages: list[dict] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


@dataclass
class Recovery(Event):
    """The model's output could not be used as-is; says why and what was done instead. `routine`: not
    a repair but a step the guided procedure takes by design (a small model's prefilled action, a
    closed question answered by choice among its options); the UI shows it without a warning."""

    kind: ClassVar[str] = "recovery"
    turn: int
    reason: str
    action: str
    raw: str = ""
    routine: bool = False


@dataclass
class AnswerReady(Event):
    kind: ClassVar[str] = "answer"
    text: str
    forced: bool = False
    reason: str = ""  # why the answer was forced (turn cap, time limit)
    sources: list[dict] = field(default_factory=list)  # citations: n, title, url, source, sentence (backend.evidence.citations)
    read_from: list[str] = field(default_factory=list)  # titles of the passages in front of the model as it answered
    # The person's answer this one is (backend.taught.TaughtAnswer's fields), with "confirmed" (a retrieved
    # sentence states it; otherwise it is the person's word); runs logged before 2026-12-07 may also hold
    # "sources_say" and "sources_sentence" (another answer their research found stated)
    taught: dict | None = None


@dataclass
class HopAnswered(Event):
    """One sub-question of a plan of sub-questions (backend.hops) researched: as the Planner wrote it,
    as asked (earlier answers filled in), its answer and the retrieved sentence that states it."""

    kind: ClassVar[str] = "hop"
    turn: int
    number: int
    template: str
    question: str
    answer: str
    sentence: str = ""  # "Title: sentence"; "" when no retrieved sentence states the answer
    queries: list[str] = field(default_factory=list)


@dataclass
class ReflectionDecided(Event):
    kind: ClassVar[str] = "reflection"
    replan: bool
    scores: dict[str, float] = field(default_factory=dict)
    round: int = 1


@dataclass
class VerdictReady(Event):
    kind: ClassVar[str] = "verdict"
    label: str  # "correct" | "incorrect" | "not_attempted" | "unsure"
    method: str  # how it was decided: "exact-match", "closed-choice", "llm-choice ...", "evaluators+arbiter"
    ground_truth: str | None = None
    feedback: list[str] = field(default_factory=list)
    source: str | None = None  # "ground_truth" (verified) | "judge" (the Judge's opinion, unverified); None: by ground_truth
    confidence: float | None = None  # the Judge's probability of its label, where a model decided
    evidence: list[str] = field(default_factory=list)  # titles of the passages the Judge checked
    leaning: str | None = None  # for "unsure": the label the model chose before the Judge held back

    def __post_init__(self) -> None:
        if self.source is None:  # also a verdict logged before verdicts named their source
            self.source = "ground_truth" if self.ground_truth else "judge"

    @property
    def verified(self) -> bool:
        return self.source != "judge"


@dataclass
class MemoryStored(Event):
    kind: ClassVar[str] = "memory_stored"
    later_fields: ClassVar[tuple[str, ...]] = ("label", "kept_from")
    memory_id: str
    summary: str
    correct: bool
    question_type: str
    summary_source: str  # "model" | "structural" (the model gave no usable summary) | "case" (memento: plan + outcome)
    verified: bool = True  # False: only the Judge's opinion labels it, so it is neither a success nor a failure lesson
    label: str | None = None  # the memory's label in words (backend.labels.memory_words); None: an older log
    # The run whose memory this is, when not this run's: an earlier run's memory of the same question,
    # which a person holds or which was merged, kept with its own label; this run counted as one more use
    kept_from: str | None = None


@dataclass
class StepTaken(Event):
    """One finished entry of the Executor's trace, as backend.executor.Step fields: the one record of
    a step. Reflection, consolidation, rewards and replays of a logged run (backend.replay) read it."""

    kind: ClassVar[str] = "step"
    step: dict = field(default_factory=dict)


@dataclass
class RunFinished(Event):
    kind: ClassVar[str] = "run_finished"
    answer: str
    stats: dict[str, float] = field(default_factory=dict)
    stopped: bool = False  # the person stopped the run: the answer so far, not judged, nothing stored


@dataclass
class RunFailed(Event):
    kind: ClassVar[str] = "run_failed"
    message: str


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        RunStarted,
        MemoriesRetrieved,
        PlanReady,
        ExecutorThought,
        TextDelta,
        ToolCalled,
        ToolReturned,
        Recovery,
        AnswerReady,
        HopAnswered,
        ReflectionDecided,
        VerdictReady,
        MemoryStored,
        StepTaken,
        RunFinished,
        RunFailed,
    )
}


def event_from_dict(data: dict[str, Any]) -> Event:
    data = dict(data)
    cls = EVENT_TYPES[data.pop("kind")]
    return cls(**data)
