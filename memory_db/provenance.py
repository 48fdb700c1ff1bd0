"""What a memory records about the research that produced it, typed: the memory's provenance.

The app's runs, the evaluation and test-time learning's rollouts build one `Provenance` each; it is
stored as the memory's provenance JSON (`to_dict`), and later writers merge fields into that JSON
(the Manager's workflow, a person's verdict or taught answer, an edit: see `provenance_update`).
Every reader reads it back with `read_provenance`.

Each field is declared once, below, and nowhere else: `to_dict` writes every field, `read_provenance`
reads each back by its declared type, so a new field is written, stored, exported, imported and read
back by its declaration alone. Its `written` metadata says when `to_dict` writes it (by default
always). A provenance may come from an imported file: a value of the wrong type is left out, with
the reason in `left_out`, never trusted; keys no field declares (written by a newer version) are kept
in `extra` and written back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from types import NoneType, UnionType
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

RESEARCH = "research"  # a run in the app or an evaluation
LEARNING = "test-time learning"  # a rollout of the learner
MAX_LISTED = 50  # items of a list kept when read back (sources, searched titles ...)

# When `to_dict` writes a field (the field's "written" metadata).
ALWAYS = "always"
FOR_RESEARCH = "for research"  # the memory's origin is not test-time learning
FOR_LEARNING = "for learning"
WHEN_SET = "when set"  # it holds something: not None, "", [] or {}
NEVER = "never"  # what reading found, not what the memory records


def _when(written: str, default: Any = MISSING, *, factory: Any = MISSING, compare: bool = True):
    return field(default=default, default_factory=factory, compare=compare, metadata={"written": written})


@dataclass(frozen=True)
class Provenance:
    origin: str
    verified: bool  # only ground truth or a person verifies: the Judge alone can be steered by what a run read
    verdict_source: str  # "ground_truth" | "feedback" | "person" | "judge"
    ground_truth: str | None
    answer: str
    first_answer: str
    memories_used: list[str]
    trajectory: str
    run_id: str = _when(FOR_RESEARCH, "")
    models: dict[str, str] = _when(FOR_RESEARCH, factory=dict)
    judge_verdict: str = _when(FOR_RESEARCH, "")
    judge_method: str = _when(FOR_RESEARCH, "")
    judge_feedback: list[str] = _when(FOR_RESEARCH, factory=list)
    judge_confidence: float | None = _when(FOR_RESEARCH, None)
    sources: list[str] = _when(FOR_RESEARCH, factory=list)  # what the answer cites: a URL, a wiki title or a document
    searched: list[str] = _when(FOR_RESEARCH, factory=list)  # every page the run's searches returned
    method: str = _when(FOR_RESEARCH, "")
    signal: str = _when(FOR_LEARNING, "")  # where the signal came from ("feedback:<run>", "stream")
    signal_kind: str = _when(FOR_LEARNING, "")  # "ground_truth" | "thumbs" ...
    planner_version: str = _when(FOR_LEARNING, "")  # the Planner version that wrote the plan
    rollouts: int = _when(FOR_LEARNING, 0)  # rollouts of the signal
    reward: float | None = _when(FOR_LEARNING, None)  # this rollout's reward
    decomposition: list[dict] | None = _when(WHEN_SET, None)  # a plan of sub-questions as researched (backend.hops)
    plan_source: str = _when(WHEN_SET, "")  # "person": the person reviewed the plan, researched as written (backend.plan_review)
    # A person's answer the run started from, or taught with feedback (backend.taught.taught_fields).
    taught_answer: str = _when(WHEN_SET, "")
    taught_by: str = _when(WHEN_SET, "")
    taught_at: float | None = _when(WHEN_SET, None)  # seconds since the epoch
    taught_how: str = _when(WHEN_SET, "")  # backend.taught.TYPED | THUMBS_UP
    taught_evidence: dict | None = _when(WHEN_SET, None)  # {"query", "title", "sentence"}: where a source states it
    planner_draft: list[str] = _when(WHEN_SET, factory=list)  # the Planner's plan a person's plan was made from
    follow_up: dict | None = _when(WHEN_SET, None)  # a follow-up's thread and the question as typed (backend.follow_up)
    summary_source: str = _when(WHEN_SET, "")  # "workflow" | "case" (backend.manager.Consolidation)
    workflow: dict | None = _when(WHEN_SET, None)  # the run's searches as data (backend.manager.workflow_record)
    feedback_label: str = _when(WHEN_SET, "")  # a person's feedback: the label it gave (backend.feedback)
    feedback_how: str = _when(WHEN_SET, "")  # ... and how they decided it (backend.labels)
    edited_by: str = _when(WHEN_SET, "")  # who edited the summary, plan or type in the Memory view
    labelled_by: str = _when(WHEN_SET, "")  # who relabelled it in the Memory view
    extra: dict[str, Any] = _when(NEVER, factory=dict)  # keys no field declares (a newer version's), kept as they were
    left_out: dict[str, str] = _when(NEVER, factory=dict, compare=False)  # why each stored value of the wrong type was left out

    def __post_init__(self) -> None:
        named = [key for key in self.extra if key in _declared(type(self))] if self.extra else []
        if named:
            raise ValueError(f"Provenance extra keys {named} are fields: pass them as fields.")

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON: each field when its `written` metadata says so, then the extra keys."""
        stored: dict[str, Any] = {}
        for name, written in _declared(type(self)).items():
            value = getattr(self, name)
            if (written == FOR_RESEARCH and self.origin == LEARNING or written == FOR_LEARNING and self.origin != LEARNING
                    or written == WHEN_SET and _unset(value)):
                continue
            stored[name] = list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) else value
        return {**stored, **self.extra}


P = TypeVar("P", bound=Provenance)


def read_provenance(stored: Any, kind: type[P] = Provenance) -> P:
    """A stored or imported provenance as `kind` (Provenance or a subclass that declares more
    fields): each field read by its declared type; a value of the wrong type is left out (its field
    gets its default, or the empty value of its type) and `left_out` says why. A memory stored by
    test-time learning before `origin` existed named it under "source"."""
    stored = stored if isinstance(stored, dict) else {}
    values: dict[str, Any] = {}
    left_out: dict[str, str] = {}
    readers = _readers(kind)
    for name, (read, empty) in readers.items():
        if name in stored:
            value, why = read(stored[name])
            if why:
                left_out[name] = why
            if value is not _WRONG:
                values[name] = value
                continue
        if empty is not MISSING:
            values[name] = empty()
    if not isinstance(stored.get("origin"), str):
        values["origin"] = LEARNING if stored.get("source") == LEARNING else RESEARCH
    extra = {key: value for key, value in stored.items() if key not in readers}
    return kind(**values, extra=extra, left_out=left_out)


def provenance_update(**changes: Any) -> dict[str, Any]:
    """Fields to merge into a stored provenance (the store merges them key by key, so keys it does not
    know are kept): each must be a declared field of a type it accepts."""
    readers = _readers(Provenance)
    for name, value in changes.items():
        if name not in readers:
            raise ValueError(f"{name!r} is not a provenance field; declare it on memory_db.provenance.Provenance.")
        read, why = readers[name][0](value)
        if read is _WRONG or why:
            raise ValueError(f"Provenance field {name!r}: {why}.")
    return changes


@cache
def _declared(kind: type) -> dict[str, str]:
    return {f.name: f.metadata.get("written", ALWAYS) for f in fields(kind) if f.metadata.get("written") != NEVER}


@cache
def _readers(kind: type) -> dict[str, tuple[Callable[[Any], tuple[Any, str]], Any]]:
    """Each stored field's reader, made once from its declared type, and for a field without a default
    what its missing value reads as (MISSING: its default)."""
    hints = get_type_hints(kind)
    return {f.name: (_reader(hints[f.name]), _empty(hints[f.name]) if f.default is MISSING
                     and f.default_factory is MISSING else MISSING)
            for f in fields(kind) if f.metadata.get("written") != NEVER}


def _unset(value: Any) -> bool:
    return value is None or isinstance(value, str | list | dict) and not value


_WRONG = object()  # a value that cannot be read as its field's type


def _what(value: Any) -> str:
    if value is None:
        return "null"
    for kind, words in ((bool, "true or false"), (str, "text"), (int, "a whole number"), (float, "a number"),
                        (list, "a list"), (dict, "an object")):
        if isinstance(value, kind):
            return words
    return type(value).__name__


def _reader(hint: Any) -> Callable[[Any], tuple[Any, str]]:
    """A function of a stored value: (the value read as `hint`, why something was left out or ''),
    with _WRONG for a value none of which can be read."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, UnionType) and NoneType in args and len(args) == 2:
        inner = _reader(next(a for a in args if a is not NoneType))
        return lambda value: (None, "") if value is None else inner(value)
    if hint is Any:
        return lambda value: (value, "")
    if hint is bool:
        return lambda value: (value, "") if isinstance(value, bool) else (_WRONG, f"{_what(value)}, not true or false")
    if hint is int:
        return lambda value: ((value, "") if isinstance(value, int) and not isinstance(value, bool)
                              else (_WRONG, f"{_what(value)}, not a whole number"))
    if hint is float:
        return lambda value: ((float(value), "") if isinstance(value, int | float) and not isinstance(value, bool)
                              else (_WRONG, f"{_what(value)}, not a number"))
    if hint is str:
        return lambda value: (value, "") if isinstance(value, str) else (_WRONG, f"{_what(value)}, not text")
    if hint is list or origin is list:
        return _list_reader(_reader(args[0]) if args else None)
    if hint is dict or origin is dict:
        return _dict_reader(_reader(args[1]) if args and args[1] is not Any else None)
    raise TypeError(f"A provenance field cannot be of type {hint!r}: use str, bool, int, float, list, dict or one "
                    "of them or None (memory_db/provenance.py).")


def _list_reader(item: Callable | None) -> Callable[[Any], tuple[Any, str]]:
    def read(value: Any) -> tuple[Any, str]:
        if not isinstance(value, list):
            return _WRONG, f"{_what(value)}, not a list"
        items = list(value) if item is None else [v for v, why in map(item, value) if v is not _WRONG and not why]
        notes = [f"{len(value) - len(items)} of its {len(value)} items of the wrong type"] if len(items) < len(value) else []
        if len(items) > MAX_LISTED:
            notes.append(f"only its first {MAX_LISTED} of {len(items)} items kept")
        return items[:MAX_LISTED], "; ".join(notes)
    return read


def _dict_reader(entry: Callable | None) -> Callable[[Any], tuple[Any, str]]:
    def read(value: Any) -> tuple[Any, str]:
        if not isinstance(value, dict):
            return _WRONG, f"{_what(value)}, not an object"
        if entry is None:
            return dict(value), ""
        kept = {k: v for k, (v, why) in ((k, entry(v)) for k, v in value.items()) if v is not _WRONG and not why}
        return kept, f"{len(value) - len(kept)} of its {len(value)} values of the wrong type" if len(kept) < len(value) else ""
    return read


def _empty(hint: Any) -> Callable[[], Any]:
    """What a field without a default reads as when its stored value is missing or of the wrong type."""
    origin = get_origin(hint)
    if origin in (Union, UnionType):
        return lambda: None
    if hint is list or origin is list:
        return list
    if hint is dict or origin is dict:
        return dict
    return {str: str, bool: bool, int: int, float: float}[hint]
