"""How a run's facts are put in words, the same in the terminal, on the research page and in the
Memory view."""

from __future__ import annotations

import re

from backend.events import HopAnswered, MemoryStored, VerdictReady
from backend.judge import STATED_BY_IMAGE
from backend.labels import verdict_how

# How the terminal and the trace introduce a memory shown by its strategy alone (backend/strategy.py).
STRATEGY_SHOWN = "shown as its strategy, names left out"


def one_line(text: object, limit: int = 0) -> str:
    """The text on one line (whitespace runs as one space), cut to `limit` characters with "…" (0: whole)."""
    flat = re.sub(r"\s+", " ", str(text if text is not None else "")).strip()
    return flat if not limit or len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def summary_origin(source: str) -> str:
    """How a stored memory's text was made, in words: by the model, from the trace, or kept as a case."""
    return "kept as a case: plan and outcome" if source == "case" else f"summary by {source}"


def stored_label(event: MemoryStored) -> str:
    """The stored memory's label in the words every view shows (backend.labels.memory_words); a run logged
    before events carried them: 'correct', 'incorrect', or 'unverified' (neither a success nor a failure)."""
    if event.label:
        return event.label + ("" if event.verified else
                              "; neither a success nor a failure lesson until ground truth or a person confirms it")
    if not event.verified:
        return "unverified: neither a success nor a failure lesson until ground truth or a person confirms it"
    return "correct" if event.correct else "incorrect"


def uses_text(successes: int, uses: int) -> str:
    """How a memory has fared since it was stored: 'not used yet', or '2 of 3 uses succeeded (0.67)'."""
    if uses == 0:
        return "not used yet"
    return f"{successes} of {uses} use{'s' if uses != 1 else ''} succeeded ({successes / uses:.2f})"


def uses_phrase(memory: dict) -> str:
    """uses_text of a retrieved memory as events carry it (memory_to_dict)."""
    if memory.get("uses") is None:  # a run logged before memories carried their uses
        return f"win rate {memory['win_rate']:.2f}"
    return uses_text(memory.get("successes", 0), memory["uses"])


def hop_outcome(hop: HopAnswered) -> str:
    """'Great Exuma (Fyre Festival: "It was scheduled to take place on … Great Exuma …")', or the answer
    marked as stated by no retrieved sentence."""
    if not hop.answer:
        return "(no answer)"
    if hop.sentence:
        title, _, sentence = hop.sentence.partition(": ")
        return f'{hop.answer} ({title}: "{sentence}")'
    return f"{hop.answer} (no retrieved sentence states it)"


def verdict_provenance(event: VerdictReady) -> str:
    """How a verdict was reached, in words: verified against ground truth, or the Judge's opinion."""
    if event.source == "feedback":  # a person's earlier answer, recalled: never "the ground truth None"
        return f"verified: {verdict_how(event.source, event.method)}"
    if event.verified:
        return f"verified against the ground truth {event.ground_truth!r} by {event.method}"
    if event.method == STATED_BY_IMAGE:
        return "unverified: your image's text states it, as OCR read it; give a thumb or the right answer to verify it"
    confidence = f", confidence {event.confidence:.2f}" if event.confidence is not None else ""
    return f"unverified: the Judge's opinion without ground truth ({event.method}{confidence}); give a thumb or the right answer to verify it"



def person_plan_note(plan) -> str:
    """What a person's plan (PlanReady with source "person") is, in words: researched as written, and
    what it was made from."""
    if plan.drafted is None:
        return "Your plan: researched as you wrote it."
    if list(plan.drafted) == list(plan.steps):
        return "Your plan: the Planner's draft, which you reviewed and kept; researched as written."
    drafted = "; ".join(f"{n}. {step}" for n, step in enumerate(plan.drafted, 1)) or "(nothing)"
    return f"Your plan: researched as you wrote it, edited from the Planner's draft ({drafted})."
