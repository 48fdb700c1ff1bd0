"""The memory view's data: filtered and sorted table rows, a memory's detail, its history and
provenance, and the preview of an import file; the errors the view reports. Plain functions; the
view's parts (app/memory_tab.py composes them) wire them up.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from app.escaping import escape_markdown
from app.session import ReadOnlyModeError
from app.wording import one_line, uses_text
from backend.labels import memory_words
from memory_db.provenance import LEARNING, Provenance, read_provenance
from backend.runlog import RunLog
from backend.taught import TYPED, day_of, taught_of
from memory_db import HistoryEntry, Memory, MemoryStore, MemoryStoreError, StruckSource
from memory_db.lifecycle import is_verified, uses_since_stored
from memory_db.transfer import read_import_file

COLUMNS = ["id", "question", "answer", "verdict", "type", "modality", "pinned", "uses", "win rate", "age", "summary"]
SORTS = {"newest": ("created_at", True), "oldest": ("created_at", False), "win rate": ("win_rate", True),
         "uses": ("usage_count", True), "recently changed": ("updated_at", True)}
LABELS = {"all": None, "successful": True, "failed": False}
SCAN_LIMIT = 5000


@dataclass
class MemoryFilter:
    query: str = ""
    semantic: bool = False
    label: str = "all"
    modality: str = "all"
    question_type: str = "all"
    pinned_only: bool = False
    sort: str = "newest"


def age_text(moment: datetime, now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    seconds = max(0.0, (now - moment.astimezone(timezone.utc)).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def _passes(m: Memory, f: MemoryFilter) -> bool:
    wanted = LABELS[f.label]
    return (
        (wanted is None or m.correct == wanted)
        and (f.modality == "all" or m.modality == f.modality)
        and (f.question_type == "all" or m.question_type == f.question_type)
        and (not f.pinned_only or m.pinned)
    )


def find_memories(store: MemoryStore, namespace: str, f: MemoryFilter, limit: int = 200) -> list[Memory]:
    """Memories matching the filter: semantic search ranks by similarity to the query; text search
    keeps memories whose question, summary or plan contain it; otherwise the chosen sort applies."""
    if f.label not in LABELS or f.sort not in SORTS:
        raise ValueError(f"Unknown label {f.label!r} or sort {f.sort!r}.")
    query = f.query.strip()
    if query and f.semantic:
        modality = None if f.modality == "all" else f.modality
        found = store.search_contrastive(query, namespace=namespace, k=limit, modality=modality)
        ranked = sorted(found.successful + found.failed, key=lambda s: s.similarity, reverse=True)
        return [s.memory for s in ranked if _passes(s.memory, f)][:limit]
    order_by, descending = SORTS[f.sort]
    candidates = store.list(namespace=namespace, limit=SCAN_LIMIT, order_by=order_by, descending=descending)
    needle = query.lower()
    return [
        m for m in candidates
        if _passes(m, f) and (not needle or needle in f"{m.question}\n{m.summary}\n{m.plan}".lower())
    ][:limit]


VERDICT_SOURCES = {"ground_truth": "ground truth", "feedback": "a person's feedback", "person": "a person (Memory view)",
                   "judge": "the Judge alone, unverified"}


def verdict_text(m: Memory) -> str:
    """The label with how it was reached, in the words the run's trace, report and History use
    (backend.labels.memory_words): "correct (you confirmed it)", "unsure (the Judge's opinion, unverified)"."""
    return memory_words(m)


def answer_text(m: Memory) -> str:
    """The memory's answer: a person's, marked as theirs, else the one its run gave."""
    provenance = read_provenance(m.provenance)
    taught = taught_of(provenance)
    if taught is not None:
        return f"{taught['answer']} (yours)"
    return one_line(provenance.answer, 200)


def table_rows(found: list[Memory]) -> list[list]:
    rows = []
    for m in found:
        successes, uses = uses_since_stored(m)
        rows.append([m.id, m.question, answer_text(m), verdict_text(m), m.question_type, m.modality,
                     "yes" if m.pinned else "", uses, round(successes / uses, 3) if uses else "", age_text(m.created_at),
                     m.summary[:200]])
    return rows


def label_text(m: Memory) -> str:
    if not is_verified(m):
        return f"{verdict_text(m)}: neither a successful strategy nor a failure lesson until ground truth or a person confirms it"
    return f"{verdict_text(m)}: a {'successful strategy' if m.correct else 'failure lesson'}"


def detail_markdown(m: Memory) -> str:
    p = read_provenance(m.provenance)
    lines = [
        f"### Memory `{escape_markdown(m.id)}`",
        f"**Question:** {escape_markdown(m.question)}",
        f"**Label:** {escape_markdown(label_text(m))} · **type:** {escape_markdown(m.question_type)} · "
        f"**modality:** {escape_markdown(m.modality)} · **pinned:** {'yes' if m.pinned else 'no'}",
        f"**Win rate:** {escape_markdown(uses_text(*uses_since_stored(m)))} · created {age_text(m.created_at)} ago",
    ]
    taught = taught_of(p)
    if taught is not None:
        how = "typed as the right answer" if taught["how"] == TYPED else "confirmed with a thumbs up"
        by = f" by {taught['by']}" if taught["by"] else ""
        when = f" on {day_of(taught['at'])}" if isinstance(taught["at"], (int, float)) else ""
        lines.append(f"**Taught answer:** {escape_markdown(taught['answer'])} ({how}{escape_markdown(by)}{when}; "
                     "the same question or a rewording starts from it)")
        evidence = taught.get("evidence")
        if isinstance(evidence, dict) and evidence.get("sentence"):
            lines.append(f"**Where a source states it:** {escape_markdown(evidence.get('title', ''))}: "
                         f"“{escape_markdown(evidence['sentence'])}” "
                         f"(search: {escape_markdown(evidence.get('query', ''))})")
    if m.caption:
        lines.append(f"**Image caption:** {escape_markdown(m.caption)}")
    source = VERDICT_SOURCES.get(p.verdict_source, "not recorded (unverified)")
    lines.append(f"**Verdict from:** {escape_markdown(source)}"
                 + (f" · ground truth: {escape_markdown(p.ground_truth)}" if p.ground_truth else ""))
    if p.answer:
        lines.append(f"**Answer given:** {escape_markdown(p.answer)}")
    lines += origin_lines(p)
    if p.run_id:
        lines.append(f"**From run:** `{escape_markdown(p.run_id)}` "
                     f"(judge: {escape_markdown(p.judge_verdict or '-')} "
                     f"by {escape_markdown(p.judge_method or '-')})")
    if p.left_out:
        lines.append("**Left out of its provenance (stored values of the wrong type):** " + "; ".join(
            f"{escape_markdown(key)}: {escape_markdown(why)}" for key, why in p.left_out.items()))
    return "\n\n".join(lines)


def origin_lines(provenance: Provenance) -> list[str]:
    """Where the answer's sources are and, for a memory test-time learning stored, which rollout."""
    lines = []
    if provenance.sources:
        lines.append("**Sources cited:** " + " · ".join(escape_markdown(s) for s in provenance.sources))
    elif provenance.searched:
        lines.append(f"**Sources cited:** none; the searches returned {len(provenance.searched)} pages")
    if provenance.decomposition:
        lines.append("**Sub-questions, as researched:**\n\n" + "\n".join(
            hop_line(number, hop) for number, hop in enumerate(provenance.decomposition, 1)))
    if provenance.origin == LEARNING:
        reward = f", reward {provenance.reward:.2f}" if provenance.reward is not None else ""
        lines.append(f"**From test-time learning:** one of {provenance.rollouts} rollouts by Planner "
                     f"{escape_markdown(provenance.planner_version or '?')}{reward} "
                     f"(signal: {escape_markdown(provenance.signal or '?')})")
    return lines


def hop_line(number: int, hop: dict) -> str:
    """'1. Which festival …? → **Fyre Festival** (Fyre Festival: “The Fyre Festival was …”)': a sub-question
    as asked, its answer and the retrieved sentence that states it (fields read as text: a memory may
    come from an import)."""
    asked = str(hop.get("question") or hop.get("template") or "")
    answer = str(hop.get("answer") or "") or "(no answer)"
    title, _, sentence = str(hop.get("sentence") or "").partition(": ")
    stated = (f"{escape_markdown(title)}: “{escape_markdown(one_line(sentence, 200))}”" if sentence
              else "no retrieved sentence states it")
    return f"{number}. {escape_markdown(asked)} → **{escape_markdown(answer)}** ({stated})"


def unreadable_note(store: MemoryStore, namespace: str, shown: int = 5) -> str:
    """A warning naming the rows of `namespace` that cannot be read (and how to remove them), or ''."""
    broken = store.unreadable(namespace=namespace)
    if not broken:
        return ""
    listed = "; ".join(f"`{escape_markdown(b.memory_id)}` ({escape_markdown(b.reason)})" for b in broken[:shown])
    more = f" and {len(broken) - shown} more" if len(broken) > shown else ""
    one = len(broken) == 1
    return (f"⚠️ {len(broken)} {'memory cannot' if one else 'memories cannot'} be read and {'is' if one else 'are'} "
            f"left out of lists, searches and exports: {listed}{more}. To remove one, paste its id into "
            "'Memory id', press Open, then Delete.")


def history_rows(entries: list[HistoryEntry], struck: dict[int, str] | None = None) -> list[list]:
    """`struck`: by history id, what a strike (or its undo) concerns, shown as what changed."""
    rows = []
    for e in entries:
        changed = []
        if isinstance(e.before, dict) and isinstance(e.after, dict):
            changed = [k for k in ("summary", "plan", "correct", "pinned", "question_type", "usage_count")
                       if e.before.get(k) != e.after.get(k)]
        elif struck and e.id in struck:
            changed = [struck[e.id]]
        rows.append([e.id, e.action, ", ".join(changed), e.actor, e.created_at.strftime("%Y-%m-%d %H:%M:%S")])
    return rows


STRUCK_COLUMNS = ["#", "what", "title", "cited sentence", "struck by", "when"]


def struck_concerns(sources: list[StruckSource]) -> dict[int, str]:
    """By history id, what each strike and undo of `sources` concerns ("the memory itself", or the source's title)."""
    concerns = {}
    for s in sources:
        what = "the memory itself" if s.kind == "memory" else f"source: {one_line(s.title, 80)}"
        for history_id in (s.strike_history_id, s.unstrike_history_id):
            if history_id is not None:
                concerns[history_id] = what
    return concerns


def struck_rows(sources: list[StruckSource]) -> list[list]:
    """The struck sources of a namespace as the Memory view lists them (row i is sources[i])."""
    rows = []
    for number, s in enumerate(sources, 1):
        what = "memory" if s.kind == "memory" else ("document passage" if (s.url or "").startswith("doc://")
                                                   else "web page" if s.url else "wiki article")
        rows.append([number, what, s.title, one_line(s.sentence or "", 200), s.actor,
                     s.updated_at.strftime("%Y-%m-%d %H:%M")])
    return rows


def undo_line(entry: HistoryEntry | None) -> str:
    """Which change Undo reverts now, in a line."""
    if entry is None:
        return "No change to undo."
    when = entry.created_at.strftime("%Y-%m-%d %H:%M:%S")
    return f"Selected for undo: change {entry.id} ({escape_markdown(entry.action)} by {escape_markdown(entry.actor)}, {when})."


def runs_using(store: MemoryStore, runlog: RunLog, namespace: str, memory_id: str, max_runs: int = 200) -> list[list]:
    """Where this memory was used: later memories whose provenance lists it, and logged runs that
    retrieved it. Rows: run id, question, how it is known."""
    rows: dict[str, list] = {}
    for m in store.list(namespace=namespace, limit=SCAN_LIMIT):
        p = read_provenance(m.provenance)
        if memory_id in p.memories_used and p.run_id:
            rows[p.run_id] = [p.run_id, m.question, f"provenance of memory {m.id[:8]}"]
    for summary in runlog.list_runs(namespace, limit=max_runs):
        if summary.run_id in rows:
            continue
        for event in runlog.load(namespace, summary.run_id):
            if event.kind == "memories" and memory_id in [x["id"] for x in event.successful + event.failed]:
                rows[summary.run_id] = [summary.run_id, summary.question, "run log"]
                break
    return list(rows.values())


IMPORT_PREVIEW_COLUMNS = ["id", "question", "label", "type", "uses", "in this namespace"]
ALREADY_HERE = "already here (same id)"
EXISTING_CHOICES = {"Skip them (keep the stored memories)": "skip",
                    "Replace them with the file's version (undoable)": "replace"}


def import_preview(path: str, namespace: str, store: MemoryStore | None = None, *,
                   max_text_chars: int | None = None) -> tuple[str, list[list]]:
    """Parse and validate an export without importing; raises memory_db.ImportFileError on a bad line
    (or a text longer than `max_text_chars`). With `store`, says which memories the namespace already
    holds (an export imported back) and that Import will skip or replace them, as chosen."""
    parsed = read_import_file(path, namespace, max_text_chars=max_text_chars)
    held = store.existing_ids(namespace, [m.id for m in parsed.memories]) if store is not None else set()
    rows = [[m.id, m.question, "successful" if m.correct else "failed", m.question_type, m.usage_count,
             ALREADY_HERE if m.id in held else "new"] for m in parsed.memories]
    summary = (f"{len(parsed.memories)} memories and {len(parsed.history)} history entries in this file, for "
               f"namespace `{escape_markdown(namespace)}`.")
    if held:
        fresh = len(parsed.memories) - len(held)
        summary += (f" {len(held)} of them {'is' if len(held) == 1 else 'are'} already here (same id) and "
                    f"{fresh} {'is' if fresh == 1 else 'are'} new: choose below whether Import skips or replaces "
                    "the ones already here; history entries already here are not added twice.")
    summary += " Press Import to apply."
    return summary, rows


def import_message(outcome, namespace: str) -> str:
    """What an import did, in a sentence (memory_db.ImportOutcome)."""
    parts = [f"Imported {outcome.added + outcome.replaced} memories into `{escape_markdown(namespace)}`"]
    details = [f"{outcome.added} new"]
    if outcome.replaced:
        details.append(f"{outcome.replaced} replaced (undo each from its history)")
    if outcome.skipped:
        details.append(f"{outcome.skipped} skipped: already here")
    details.append(f"{outcome.history} history entries added")
    return parts[0] + ": " + ", ".join(details) + "."


KNOWN_ERRORS = (MemoryStoreError, ReadOnlyModeError, ValueError, OSError)  # reported on the page, as problem() words them


def problem(exc: Exception) -> str:
    return f"⚠️ {escape_markdown(exc)}"
