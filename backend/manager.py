"""The Manager: retrieves contrastive memories and consolidates finished trajectories into them.

Consolidation compresses the trajectory into a workflow summary built from the run's own record:
what was searched, what came back, the sentence the answer rests on, and why the answer was right
or wrong (for a wrong one: whether any retrieved passage held the right answer). A model-written
memo invented facts the run never saw, so the summary is composed, not generated. The question is
typed by its wording (a model's constrained choice only when the wording does not say), and the
memory is stored with its verdict and provenance. Only this judged path writes memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from backend.answer_match import answer_contains, normalize_answer
from backend.config import MemoryConfig
from backend.evidence import stating_sentence
from backend.llm.base import ChatModel
from backend.prompts.manager import classify_messages
from backend.question import Question
from backend.strategy import strategy_outline
from backend.taught import taught_of
from memory_db import ContrastiveMemories, Memory, MemoryStore, NewMemory
from memory_db.lifecycle import is_verified, uses_since_stored
from memory_db.provenance import Provenance, read_provenance

QUESTION_TYPES = (
    "location", "human", "time", "career", "process",
    "definition", "event", "function", "property", "others",
)

# What a question's wording says it asks for, checked in order; a question no rule matches is typed
# by the Manager's model. Closed questions (yes/no, "A or B?") ask for a property of the two.
_W = r"(?:\s+[\w'’-]+){0,3}\s+"  # up to three words between "what"/"which" and the noun it asks for
_TYPE_RULES = (
    ("career", r"\b(job|occupation|profession|career|position|office|worked? as|role)\b"),
    ("time", r"^(when|what year|which year|in what year|in which year|what date|what decade|what century)\b"
             rf"|\b(what|which){_W}(year|date|decade|century|month|day)\b|\bwhen\b"),
    ("location", rf"\bwhere\b|\b(what|which|in what|in which){_W}?(city|country|state|town|county|province|region|island|"
                 r"place|continent|location|river|village|district|area|street|stadium|venue|mountain|lake|cities|countries)s?\b"),
    ("human", rf"^(who|whom|whose)|\b(who|whom|whose)\b|\b(what|which|name the){_W}?(person|man|woman|actor|actress|singer|"
              r"author|writer|director|player|politician|musician|artist|queen|king|president|leader|founder|"
              r"composer|producer|rapper|poet|scientist|coach|footballer|wrestler|boxer|member)s?\b"),
    ("event", rf"\b(what|which){_W}?(event|war|battle|festival|competition|tournament|election|award|ceremony|game)s?\b"),
    ("function", r"\b(used for|purpose of|function of)\b"),
    ("process", r"^how (did|does|do|is|was|were|are|can|to)\b"),
    ("property", r"^(how (many|much|old|long|tall|big|large|far|high))\b|^(is|are|was|were|do|does|did|can|could|has|have|had)\b"
                 r"|\bor\b[^,]*\?$|\b(nationality|population|capacity|height|length|number|name)\b"),
    ("definition", r"^what (is|are|was|were) (a|an|the)?\s?\w+\??$"),
)


def type_by_wording(question: Question) -> str | None:
    text = " ".join(question.text.lower().split())
    found = next((name for name, pattern in _TYPE_RULES if re.search(pattern, text)), None)
    return found or ("property" if question.closed else None)


def clean_plan_steps(plan_steps: list[str], answer: str, question: str) -> list[str]:
    """A plan as a memory keeps it: each step once, and no step carrying the run's answer (a plan that
    states an answer teaches the next question to search for that answer)."""
    kept, seen = [], set()
    carries = bool(normalize_answer(answer)) and not answer_contains(question, answer)
    for step in plan_steps:
        key = normalize_answer(step)
        if not key or key in seen or (carries and answer_contains(step, answer)):
            continue
        seen.add(key)
        kept.append(step)
    return kept


def _quoted(items: list[str]) -> str:
    return ", ".join(f"'{i}'" for i in items)


def distinct_searches(steps: list) -> list[dict]:
    """The run's tool calls in order, each distinct call once: {"tool", "queries", "titles", "ok"}."""
    searches, seen = [], set()
    for step in steps:
        if not getattr(step, "tool", None):
            continue
        queries = step.arguments.get("query_list") or [step.arguments.get("url") or step.arguments.get("goal")
                                                       or step.arguments.get("expression") or ""]
        queries = [str(q) for q in queries if str(q).strip()] if isinstance(queries, list) else [str(queries)]
        key = (step.tool, tuple(q.lower() for q in queries))
        if key in seen:
            continue
        seen.add(key)
        searches.append({"tool": step.tool, "queries": queries, "titles": list(step.titles), "ok": bool(step.ok)})
    return searches


def workflow_record(*, steps: list, passages: list[dict], question: Question, support: str | None,
                    ground_truth: str | None) -> dict:
    """The workflow as data, kept in a memory's provenance so that its strategy can be read back without
    its entities (backend.strategy): each distinct search with the titles it found, the title of the
    passage the answer rests on, and, with ground truth, whether any retrieved passage stated it."""
    return {
        "searches": [{**s, "titles": s["titles"][:5]} for s in distinct_searches(steps)],
        "support_title": support.split(":", 1)[0].strip() if support else None,
        "gold_retrieved": (bool(stating_sentence(ground_truth, question.text, passages))
                           if ground_truth and not question.closed else None),
    }


def workflow_summary(*, question: Question, steps: list, passages: list[dict], answer: str, verdict: str,
                     verified: bool, ground_truth: str | None = None, support: str | None = None) -> str:
    """How the question was researched, from the run's own steps: each distinct search with what it
    found, the sentence the answer rests on, and why the answer was (in)correct."""
    searches = []
    for search in distinct_searches(steps):
        found = ", ".join(search["titles"][:3]) or ("an error" if not search["ok"] else "nothing")
        searches.append(f"{search['tool']} {_quoted(search['queries'])} found {found}")
    parts = ["Searched: " + "; then ".join(searches) + "." if searches else "No search was made."]
    if support:
        parts.append(f"The answer rests on: \"{support.rstrip('. ')}\".")
    if verdict == "not_attempted" or not answer.strip():
        parts.append("No answer was given.")
    elif not verified:
        parts.append(f"Answered '{answer}'; the Judge, without ground truth, said {verdict} (unverified).")
    elif verdict == "correct":
        parts.append(f"Answered '{answer}': correct (verified).")
    else:
        why = ""
        if ground_truth and question.closed:
            # The question names its answers: no passage "states" one, so where it stood says nothing.
            why = f" The right answer, of those the question allows, was '{ground_truth}'."
        elif ground_truth:
            where = stating_sentence(ground_truth, question.text, passages)
            why = (f" The right answer '{ground_truth}' was in a retrieved passage ({where.split(':', 1)[0]}) "
                   "but was not read from it." if where else
                   f" The right answer '{ground_truth}' was in no retrieved passage: the searches missed it.")
        parts.append(f"Answered '{answer}': incorrect (verified).{why}")
    return " ".join(parts)


@dataclass
class Consolidation:
    memory: Memory
    summary_source: str  # "workflow" (composed from the run's steps) | "case" (memento: plan + outcome)


def memory_to_dict(scored, min_similarity: float | None = None) -> dict:
    """A retrieved memory as events and prompts carry it. One less similar to the question than
    `min_similarity` came from its question type (Manager.retrieve's `fill_by_type`) and carries its
    `strategy`: the workflow without its entities (backend.strategy)."""
    m = scored.memory
    provenance = read_provenance(m.provenance)
    strategy = None
    if min_similarity is not None and scored.similarity < min_similarity and provenance.workflow:
        strategy = strategy_outline(m.question, provenance.workflow, provenance.answer, m.correct)
    return {
        "id": m.id,
        "question": m.question,
        "caption": m.caption,
        "summary": m.summary,
        "plan": m.plan,
        "correct": m.correct,
        "verified": is_verified(m),
        "win_rate": round(m.win_rate, 3),
        "successes": uses_since_stored(m)[0],  # of the runs that used it since it was stored
        "uses": uses_since_stored(m)[1],
        "similarity": round(float(scored.similarity), 4),
        "score": round(float(scored.score), 4),
        "trajectory": provenance.trajectory or None,
        "question_type": m.question_type,
        "strategy": strategy,
        "taught": taught_of(provenance),
        "decomposition": provenance.decomposition,  # a plan of sub-questions, as researched (backend.hops)
        "plan_source": provenance.plan_source or None,  # "person": a plan the person reviewed (backend.plan_review)
    }


def case_summary(plan_steps: list[str], answer: str, verdict: str) -> str:
    """A case as the memento baseline keeps it: the plan and its outcome, with no model-written summary."""
    plan = "; ".join(plan_steps[:5]) or "(no plan)"
    return f"Plan: {plan}. Answer given: {answer or '(none)'} ({verdict})."


def cap_words(text: str, max_words: int) -> str:
    words = text.split()
    return text.strip() if len(words) <= max_words else " ".join(words[:max_words])


def scoring_weights(scoring: MemoryConfig) -> dict[str, float]:
    """The [memory] section's ranking weights as the store's search keywords."""
    return {"similarity_weight": scoring.similarity_weight, "win_rate_weight": scoring.win_rate_weight,
            "caption_weight": scoring.caption_weight}


class Manager:
    def __init__(self, model: ChatModel, store: MemoryStore, *, summary_max_words: int = 300) -> None:
        self.model, self.store = model, store
        self.summary_max_words = summary_max_words

    def retrieve(self, question: str, namespace: str, caption: str | None, k: int,
                 min_similarity: float | None = None, scoring: MemoryConfig = MemoryConfig()) -> ContrastiveMemories:
        """The k best successful and failed memories that ground truth or a person verified, ranked with
        `scoring`'s weights (the config's [memory] section). A memory only the Judge labelled is not
        shown: its opinion can be steered by what its run read."""
        found = self.store.search_contrastive(question, namespace=namespace, caption=caption, k=4 * k,
                                              min_similarity=min_similarity, **scoring_weights(scoring))

        def verified(items):
            return sorted((m for m in items if is_verified(m.memory) and m.score > 0), key=lambda m: -m.score)[:k]

        return ContrastiveMemories(successful=verified(found.successful), failed=verified(found.failed))

    def classify(self, question: Question) -> str:
        by_wording = type_by_wording(question)
        if by_wording is not None:
            return by_wording
        choice = self.model.choose(classify_messages(question.text, QUESTION_TYPES), list(QUESTION_TYPES))
        return choice.label if choice.label in QUESTION_TYPES else "others"

    def consolidate(
        self,
        *,
        question: Question | str,
        caption: str | None,
        plan_steps: list[str],
        steps: list,
        passages: list[dict],
        answer: str,
        verdict: str,
        namespace: str,
        provenance: Provenance,
        support: str | None = None,
        keep_contrast: bool = False,
        compress: bool = True,
    ) -> Consolidation:
        """Store the trajectory as a memory: a workflow summary (compress) or, for the memento baseline,
        a plain case (plan + outcome). `provenance` says whether the verdict is verified and holds the
        ground truth when there is one; `steps` are the Executor's (backend.executor.Step). `question` as
        the episode parsed it, or its text (training's rollouts: parsed here, once)."""
        question = Question.of(question)
        clean_steps = clean_plan_steps(plan_steps, answer, question.text)
        if compress:
            summary = workflow_summary(
                question=question, steps=steps, passages=passages, answer=answer, verdict=verdict,
                verified=provenance.verified, ground_truth=provenance.ground_truth, support=support,
            )
            source = "workflow"
        else:
            summary, source = case_summary(clean_steps, answer, verdict), "case"
        memory = self.store.add(
            NewMemory(
                question=question.text,
                summary=cap_words(summary, self.summary_max_words),
                plan="\n".join(f"{i}. {s}" for i, s in enumerate(clean_steps, 1)),
                correct=verdict == "correct",
                namespace=namespace,
                caption=caption,
                question_type=self.classify(question),
                provenance=replace(provenance, summary_source=source,
                                   workflow=workflow_record(steps=steps, passages=passages, question=question,
                                                            support=support, ground_truth=provenance.ground_truth)
                                   ).to_dict(),
            ),
            keep_contrast=keep_contrast,
        )
        return Consolidation(memory=memory, summary_source=source)
