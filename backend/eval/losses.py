"""Where an evaluation's misses are lost, read from its rows, its run logs and the question file's
supporting facts (HotpotQA names the paragraphs a question's answer rests on).

Each miss gets one cause, the first that applies:
  run failed                the run stopped with an error
  judge error               a hand label says the answer is right (only with labels)
  no usable answer          empty, a placeholder, the question echoed, cut off (backend.judge.answer_problem)
  no gold retrieved         no supporting paragraph was among the passages the run's searches returned
  gold retrieved, not read  one was returned, and the answer is still wrong; split by whether a
                            returned gold paragraph was in front of the model as it answered
                            (the answer event's `read_from`; "not recorded" for older run logs)
  gold unknown              the question file names no supporting paragraphs

A miss on a question of two supporting pages also gets the hop where it went wrong (`hop_cause`),
whatever the method. A bridge question names one of its pages and not the other (the bridge page,
whose paragraph states the answer): a plan of sub-questions whose first hop did not answer the
bridge, an answer that is the bridge itself (the second hop never taken), the bridge page never
retrieved, or retrieved and read wrong. A question that names both (a comparison, "both A and B"):
one of them never retrieved, or both retrieved and read wrong.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from backend.answer_match import answer_contains, normalize_answer
from backend.config import REPO_ROOT
from backend.eval.results import EvalRow
from backend.eval.spec import logged_events
from backend.events import AnswerReady, Event, HopAnswered, ToolReturned
from backend.judge import answer_problem
from backend.tools.page_links import base_name

FAILED = "run failed"
JUDGE_ERROR = "judge error"
NO_ANSWER = "no usable answer"
NO_GOLD = "no gold retrieved"
NOT_READ_SHOWN = "gold retrieved, not read: it was in front of the model"
NOT_READ_HIDDEN = "gold retrieved, not read: no longer in front of the model"
NOT_READ_UNRECORDED = "gold retrieved, not read: what the model saw not recorded"
GOLD_UNKNOWN = "gold unknown"
CLOSED_ANSWERS = {"", "yes", "no"}
CAUSES = (FAILED, JUDGE_ERROR, NO_ANSWER, NO_GOLD, NOT_READ_SHOWN, NOT_READ_HIDDEN, NOT_READ_UNRECORDED, GOLD_UNKNOWN)
HOP1_WRONG = "bridge: first sub-question's answer not the bridge page"
STOPPED_AT_BRIDGE = "bridge: answered with the bridge itself"
BRIDGE_MISSED = "bridge: bridge page never retrieved"
LAST_HOP_MISREAD = "bridge: both pages retrieved, read wrong"
OPTION_MISSED = "both named: a page never retrieved"
OPTIONS_MISREAD = "both named: both retrieved, read wrong"
HOP_CAUSES = (HOP1_WRONG, STOPPED_AT_BRIDGE, BRIDGE_MISSED, LAST_HOP_MISREAD, OPTION_MISSED, OPTIONS_MISREAD)


@dataclass(frozen=True)
class Retrieval:
    """What one run's searches returned, and what was in front of the model as it gave its answer."""

    titles: frozenset[str]
    texts: tuple[str, ...]
    read_from: frozenset[str]
    hops: tuple[HopAnswered, ...] = ()  # each hop's last research (a redone hop counts as redone)


@dataclass
class LossBreakdown:
    misses: int = 0
    causes: Counter = field(default_factory=Counter)
    answer_in_results: int = 0  # misses with gold retrieved whose gold answer (not yes/no) a returned passage holds
    all_gold_retrieved: int = 0  # misses for which every supporting paragraph was returned
    labelled_passes: int = 0  # passes a hand label covers
    false_passes: int = 0  # of those, the label says wrong: accuracy is overstated by these
    hop_causes: Counter = field(default_factory=Counter)  # misses on questions of two pages, by hop


def supporting_titles(data_file: Path | str) -> dict[str, frozenset[str]]:
    """Question id -> titles of its supporting paragraphs (HotpotQA's `supporting_facts`, in either the
    original [[title, sentence], ...] form or the {"title": [...], "sent_id": [...]} form)."""
    path = resolve_data_file(data_file)
    titles: dict[str, frozenset[str]] = {}
    if path is None:
        return titles
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if isinstance(record.get("supporting_facts"), (dict, list)):
            titles[str(record.get("id") or record.get("_id"))] = frozenset(record_supporting_titles(record))
    return titles


def record_supporting_titles(record: dict) -> list[str]:
    """One HotpotQA record's supporting titles, in order, each once."""
    facts = record.get("supporting_facts")
    if isinstance(facts, dict):
        names = facts.get("title") or []
    elif isinstance(facts, list):
        names = [fact[0] for fact in facts if isinstance(fact, (list, tuple)) and fact]
    else:
        names = []
    return list(dict.fromkeys(n for n in names if isinstance(n, str)))


def resolve_data_file(data_file: Path | str) -> Path | None:
    """The question file a manifest names (relative to where the evaluation ran, usually the repository)."""
    path = Path(data_file)
    for candidate in (path, REPO_ROOT / path):
        if candidate.is_file():
            return candidate
    return None


def returned_passages(events: list[Event]) -> list[dict]:
    """Every passage a run's tools returned, in order."""
    return [p for e in events if isinstance(e, ToolReturned) for p in e.passages]


def run_retrieval(eval_dir: Path, namespace: str, run_id: str) -> Retrieval | None:
    """The passages a logged run's tools returned and its last answer's `read_from`; None without a log."""
    events = logged_events(eval_dir, namespace, run_id)
    if events is None:
        return None
    passages = returned_passages(events)
    answers = [e for e in events if isinstance(e, AnswerReady)]
    last_hops = {e.number: e for e in events if isinstance(e, HopAnswered)}
    return Retrieval(
        titles=frozenset(p.get("title", "") for p in passages),
        texts=tuple(p.get("text") or "" for p in passages),
        read_from=frozenset(answers[-1].read_from) if answers else frozenset(),
        hops=tuple(last_hops[n] for n in sorted(last_hops)),
    )


def hop_cause(question: str, answer: str, gold_titles: frozenset[str] | None,
              retrieval: Retrieval | None) -> str | None:
    """Where a miss on a question of two supporting pages went wrong (HOP_CAUSES), or None: not two
    pages, neither named in the question, or no run log. A page counts as named when the question
    holds its title without a disambiguation ("The Hard Way" for "The Hard Way (1991 film)")."""
    if not gold_titles or len(gold_titles) != 2 or retrieval is None:
        return None
    unnamed = [t for t in gold_titles if not answer_contains(question, base_name(t))]
    if not unnamed:
        return OPTIONS_MISREAD if gold_titles <= retrieval.titles else OPTION_MISSED
    if len(unnamed) != 1:
        return None
    bridge = unnamed[0]
    if len(retrieval.hops) >= 2 and not _names(retrieval.hops[0].answer, bridge):
        return HOP1_WRONG
    if _names(answer, bridge):
        return STOPPED_AT_BRIDGE
    return LAST_HOP_MISREAD if bridge in retrieval.titles else BRIDGE_MISSED


def _names(answer: str, title: str) -> bool:
    """Whether `answer` is the page `title` (either holds the other's name as whole words)."""
    name = base_name(title)
    return bool(answer) and (answer_contains(answer, name) or answer_contains(name, answer))


def read_labels(paths: list[Path]) -> dict[tuple[str, str], bool]:
    """(question id, answer) -> whether a person judged the answer right (benchmarks/judge_labels)."""
    labels = {}
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                label = json.loads(line)
                labels[(label["id"], label["answer"])] = bool(label["right"])
    return labels


def miss_cause(row: EvalRow, gold_titles: frozenset[str] | None, retrieval: Retrieval | None,
               label: bool | None) -> str:
    if row.error:
        return FAILED
    if label is True:
        return JUDGE_ERROR
    if answer_problem(row.question, row.answer):
        return NO_ANSWER
    if not gold_titles or retrieval is None:
        return GOLD_UNKNOWN
    found = gold_titles & retrieval.titles
    if not found:
        return NO_GOLD
    if not retrieval.read_from:
        return NOT_READ_UNRECORDED
    return NOT_READ_SHOWN if found & retrieval.read_from else NOT_READ_HIDDEN


def loss_breakdown(eval_dir: Path, manifest: dict, rows: list[EvalRow],
                   labels: dict[tuple[str, str], bool] | None = None) -> LossBreakdown:
    gold = supporting_titles(manifest["data"])
    labels = labels or {}
    breakdown = LossBreakdown()
    for row in rows:
        label = labels.get((row.id, row.answer))
        if row.correct:
            if label is not None:
                breakdown.labelled_passes += 1
                breakdown.false_passes += not label
            continue
        breakdown.misses += 1
        retrieval = run_retrieval(eval_dir, manifest["namespace"], row.run_id) if row.run_id else None
        cause = miss_cause(row, gold.get(row.id), retrieval, label)
        breakdown.causes[cause] += 1
        by_hop = hop_cause(row.question, row.answer, gold.get(row.id), retrieval)
        if by_hop is not None:
            breakdown.hop_causes[by_hop] += 1
        if cause.startswith("gold retrieved"):
            breakdown.all_gold_retrieved += gold[row.id] <= retrieval.titles
            gold_answer = normalize_answer(row.gold)
            # "yes" / "no" occur in any text: only an answer a passage can state is looked for.
            breakdown.answer_in_results += gold_answer not in CLOSED_ANSWERS and any(
                f" {gold_answer} " in f" {normalize_answer(text)} " for text in retrieval.texts)
    return breakdown
