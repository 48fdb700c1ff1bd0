"""A run's events as the lines the CLI prints: plain text (a terminal renders no HTML), with control
characters made visible."""

from __future__ import annotations

import json
import re

from app.report import stats_text
from app.wording import (STRATEGY_SHOWN, hop_outcome, person_plan_note, stored_label, summary_origin, uses_phrase,
                         verdict_provenance)
from backend.events import (
    AnswerReady, Event, ExecutorThought, HopAnswered, MemoriesRetrieved, MemoryStored, PlanReady,
    ReflectionDecided, Recovery, RunFailed, RunFinished, RunStarted, ToolCalled, ToolReturned, VerdictReady,
)
from backend.taught import answer_note, near_note, recall_note

# Control characters but tab and newline: in a question, an answer or a page they could move the
# cursor, recolour or retitle the terminal; printed as visible escapes instead.
TERMINAL_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    return TERMINAL_CONTROLS.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def json_for_terminal(data: object) -> str:
    """One JSON line; json.dumps escapes C0 controls, this also escapes DEL and the C1 controls."""
    return TERMINAL_CONTROLS.sub(lambda found: f"\\u{ord(found.group()):04x}", json.dumps(data, ensure_ascii=False))


def event_to_text(event: Event) -> str:
    """One event as plain terminal lines (no HTML escaping: a terminal renders none; control
    characters made visible)."""
    return terminal_safe(_event_lines(event))


def _event_lines(event: Event) -> str:
    if isinstance(event, RunStarted):
        extra = f"\nImage: {event.image} (caption: {event.caption or 'none'}, from {event.caption_source or '-'})" if event.image else ""
        if event.follow_up:
            extra += (f"\nFollow-up of run {event.follow_up.get('follows')}: you asked \"{event.follow_up.get('asked')}\". "
                      f"{event.follow_up.get('how') or ''}").rstrip()
        return f"Question: {event.question}{extra}"
    if isinstance(event, MemoriesRetrieved):
        lines = [f"Memories: {len(event.successful)} successful, {len(event.failed)} failed"]
        if event.taught:
            lines.append(f"  {recall_note(event.taught)}")
        if event.near_taught:
            lines.append(f"  {near_note(event.near_taught)}")
        for label, items in (("+", event.successful), ("-", event.failed)):
            for m in items:
                lines.append(f"  {label} [{m['id'][:8]}] {uses_phrase(m)}, score {m['score']:.2f}: {m['question']}")
                if m.get("strategy"):
                    lines.append(f"      {STRATEGY_SHOWN}: {m['strategy']}")
        return "\n".join(lines)
    if isinstance(event, PlanReady):
        title = "Plan" if event.revision == 0 else f"Supplementary plan (reflection {event.revision})"
        lines = [f"{title}:"] + [f"  {i}. {s}" for i, s in enumerate(event.steps, 1)]
        if event.source == "person":
            lines.append(f"  ({person_plan_note(event)})")
        if event.recovered:
            lines.append(f"  (recovery: {event.recovered})")
        if event.chosen:
            lines.append(f"  (chosen: {event.chosen})")
        return "\n".join(lines)
    if isinstance(event, ExecutorThought):
        return f"[turn {event.turn}] think: {event.text}"
    if isinstance(event, ToolCalled):
        return f"[turn {event.turn}] tool call: {event.name} {_args_text(event.arguments)}"
    if isinstance(event, ToolReturned):
        if not event.ok:
            return f"[turn {event.turn}] tool error ({event.name}): {event.error}"
        titles = "; ".join(p["title"] for p in event.passages) or "(no passages)"
        return f"[turn {event.turn}] tool response ({event.name}, {event.seconds:.2f} s): {titles}"
    if isinstance(event, Recovery):
        return f"[turn {event.turn}] {'guided' if event.routine else 'recovery'}: {event.reason} -> {event.action}"
    if isinstance(event, AnswerReady):
        forced = f" (forced: {event.reason})" if event.forced else ""
        marks = "".join(f" [{s.get('n', i)}]" for i, s in enumerate(event.sources, 1))
        lines = [f"Answer{forced}: {event.text or '(no answer)'}{marks}"]
        for i, s in enumerate(event.sources, 1):
            sentence = f": \"{s['sentence']}\"" if s.get("sentence") else ""
            lines.append(f"  [{s.get('n', i)}] {s.get('url') or s['title']}{sentence}")
        if not event.sources and event.text:
            lines.append("  (no retrieved passage states this answer)")
        if event.taught:
            lines.append(f"  {answer_note(event.taught)}")
        return "\n".join(lines)
    if isinstance(event, HopAnswered):
        return f"Hop {event.number}: {event.question} -> {hop_outcome(event)}"
    if isinstance(event, ReflectionDecided):
        return f"Reflection {event.round}: replan = {'yes' if event.replan else 'no'}"
    if isinstance(event, VerdictReady):
        return f"Verdict: {event.label}, {verdict_provenance(event)}"
    if isinstance(event, MemoryStored):
        label = stored_label(event)
        return f"Memory stored [{event.memory_id[:8]}] ({label}, {event.question_type}, {summary_origin(event.summary_source)}): {event.summary}"
    if isinstance(event, RunFinished):
        return f"Done: {stats_text(event.stats)}"
    if isinstance(event, RunFailed):
        return f"Error: {event.message}"
    return str(event.to_dict())


def _args_text(arguments: dict) -> str:
    return json.dumps(arguments, ensure_ascii=False)
