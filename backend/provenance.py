"""What a memory records about the research that produced it, typed.

The app's runs, the evaluation and test-time learning's rollouts build one `Provenance` each; it is
stored as the memory's provenance JSON (`to_dict`). Later writers add keys of their own to that JSON
(the Manager's workflow, a person's verdict or taught answer, an edit), kept in `extra`.
`read_provenance` reads a stored or imported provenance back: a field of the wrong type is left out,
never trusted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

RESEARCH = "research"  # a run in the app or an evaluation
LEARNING = "test-time learning"  # a rollout of the learner
MAX_LISTED = 50  # sources or searched titles kept when read back


@dataclass(frozen=True)
class Provenance:
    origin: str
    answer: str
    first_answer: str
    verified: bool  # only ground truth or a person verifies: the Judge alone can be steered by what a run read
    verdict_source: str  # "ground_truth" | "feedback" | "person" | "judge"
    ground_truth: str | None
    memories_used: list[str]
    trajectory: str
    run_id: str = ""
    method: str = ""
    models: dict[str, str] = field(default_factory=dict)
    judge_verdict: str = ""
    judge_method: str = ""
    judge_feedback: list[str] = field(default_factory=list)
    judge_confidence: float | None = None
    sources: list[str] = field(default_factory=list)  # what the answer cites: a URL, a wiki title or a document
    searched: list[str] = field(default_factory=list)  # every page the run's searches returned
    decomposition: list[dict] | None = None  # a plan of sub-questions as researched (backend.hops)
    plan_source: str = ""  # "person": the person reviewed the plan and it was researched as written (backend.plan_review)
    signal: str = ""  # learning: where the signal came from ("feedback:<run>", "stream")
    signal_kind: str = ""  # learning: "ground_truth" | "thumbs" ...
    planner_version: str = ""  # learning: the Planner version that wrote the plan
    rollouts: int = 0  # learning: rollouts of the signal
    reward: float | None = None  # learning: this rollout's reward
    extra: dict[str, Any] = field(default_factory=dict)  # keys other writers added

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON: the fields that apply to its origin, then the extra keys."""
        stored: dict[str, Any] = {
            "origin": self.origin, "verified": self.verified, "verdict_source": self.verdict_source,
            "ground_truth": self.ground_truth, "answer": self.answer, "first_answer": self.first_answer,
            "memories_used": list(self.memories_used), "trajectory": self.trajectory,
        }
        if self.origin == LEARNING:
            stored.update(signal=self.signal, signal_kind=self.signal_kind, planner_version=self.planner_version,
                          rollouts=self.rollouts, reward=self.reward)
        else:
            stored.update(run_id=self.run_id, models=dict(self.models), judge_verdict=self.judge_verdict,
                          judge_method=self.judge_method, judge_feedback=list(self.judge_feedback),
                          judge_confidence=self.judge_confidence, sources=list(self.sources),
                          searched=list(self.searched), method=self.method)
        if self.decomposition:
            stored["decomposition"] = self.decomposition
        if self.plan_source:
            stored["plan_source"] = self.plan_source
        return {**stored, **self.extra}


_TEXT = ("origin", "answer", "first_answer", "verdict_source", "trajectory", "run_id", "method", "judge_verdict",
         "judge_method", "signal", "signal_kind", "planner_version", "plan_source")
_TEXT_LISTS = ("memories_used", "judge_feedback", "sources", "searched")
_KNOWN = {f.name for f in fields(Provenance)} | {"source"}


def _number(value) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def read_provenance(stored: Any) -> Provenance:
    """A stored or imported provenance as data: wrong types are left out. A memory stored by test-time
    learning before `origin` existed named it under "source"."""
    stored = stored if isinstance(stored, dict) else {}
    text = {key: stored[key] for key in _TEXT if isinstance(stored.get(key), str)}
    if "origin" not in text:
        text["origin"] = LEARNING if stored.get("source") == LEARNING else RESEARCH
    lists = {key: [v for v in stored[key] if isinstance(v, str)][:MAX_LISTED]
             for key in _TEXT_LISTS if isinstance(stored.get(key), list)}
    models = stored.get("models")
    decomposition = stored.get("decomposition")
    rollouts = stored.get("rollouts")
    return Provenance(
        answer=text.pop("answer", ""), first_answer=text.pop("first_answer", ""),
        verified=stored.get("verified") is True, verdict_source=text.pop("verdict_source", ""),
        ground_truth=stored["ground_truth"] if isinstance(stored.get("ground_truth"), str) else None,
        memories_used=lists.pop("memories_used", []), trajectory=text.pop("trajectory", ""),
        models={k: v for k, v in models.items() if isinstance(v, str)} if isinstance(models, dict) else {},
        judge_confidence=_number(stored.get("judge_confidence")), reward=_number(stored.get("reward")),
        rollouts=rollouts if isinstance(rollouts, int) and not isinstance(rollouts, bool) else 0,
        decomposition=[d for d in decomposition if isinstance(d, dict)] if isinstance(decomposition, list) else None,
        extra={key: value for key, value in stored.items() if key not in _KNOWN},
        **text, **lists,
    )
