"""The Manager: retrieves contrastive memories and consolidates finished trajectories into them.

Consolidation compresses the trajectory into a workflow summary (how the question was researched,
never just the answer), types the question by a constrained choice, and stores the memory with
its verdict and provenance. Only this judged path writes memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.llm.base import ChatModel
from memory_db import ContrastiveMemories, Memory, MemoryStore, NewMemory

QUESTION_TYPES = (
    "location", "human", "time", "career", "process",
    "definition", "event", "function", "property", "others",
)

SUMMARY_SYSTEM = "You write short research memos."
SUMMARY_INSTRUCTION = (
    "In one or two sentences of your own words, say which searches found the evidence and what to do "
    "differently next time."
)


@dataclass
class Consolidation:
    memory: Memory
    summary_source: str  # "model" | "structural" | "case"


def memory_to_dict(scored) -> dict:
    m = scored.memory
    return {
        "id": m.id,
        "question": m.question,
        "caption": m.caption,
        "summary": m.summary,
        "plan": m.plan,
        "correct": m.correct,
        "win_rate": round(m.win_rate, 3),
        "similarity": round(float(scored.similarity), 4),
        "score": round(float(scored.score), 4),
        "trajectory": (m.provenance or {}).get("trajectory"),
    }


def structural_summary(question: str, plan_steps: list[str], trace_text: str, answer: str, verdict: str) -> str:
    """A summary built from the trace itself, used when the model writes none."""
    plan = "; ".join(plan_steps[:5])
    return f"Plan: {plan}. Research: {trace_text.replace(chr(10), ' ')} Answer given: {answer or '(none)'} ({verdict})."


def case_summary(plan_steps: list[str], answer: str, verdict: str) -> str:
    """A case as the memento baseline keeps it: the plan and its outcome, with no model-written summary."""
    plan = "; ".join(plan_steps[:5]) or "(no plan)"
    return f"Plan: {plan}. Answer given: {answer or '(none)'} ({verdict})."


def cap_words(text: str, max_words: int) -> str:
    words = text.split()
    return text.strip() if len(words) <= max_words else " ".join(words[:max_words])


class Manager:
    def __init__(self, model: ChatModel, store: MemoryStore, *, summary_max_words: int = 300) -> None:
        self.model, self.store = model, store
        self.summary_max_words = summary_max_words

    def retrieve(self, question: str, namespace: str, caption: str | None, k: int) -> ContrastiveMemories:
        return self.store.search_contrastive(question, namespace=namespace, caption=caption, k=k)

    def classify(self, question: str) -> str:
        choice = self.model.choose(
            [
                {"role": "system", "content": "You classify questions by what they ask for."},
                {
                    "role": "user",
                    "content": f"Question: {question}\nWhich type is it? Options: {', '.join(QUESTION_TYPES)}.",
                },
            ],
            list(QUESTION_TYPES),
        )
        return choice.label if choice.label in QUESTION_TYPES else "others"

    def summarise(self, question: str, plan_steps: list[str], trace_text: str, answer: str, verdict: str) -> tuple[str, str]:
        plan = "\n".join(f"{i}. {s}" for i, s in enumerate(plan_steps, 1))
        completion = self.model.generate(
            [
                {"role": "system", "content": SUMMARY_SYSTEM},
                {
                    "role": "user",
                    "content": f"Question: {question}\nPlan:\n{plan}\nResearch:\n{trace_text}\n"
                    f"Answer: {answer or '(none)'} (judged {verdict})\n\n{SUMMARY_INSTRUCTION}",
                },
            ],
            max_new_tokens=120,
        )
        summary = cap_words(completion.text, self.summary_max_words)
        if len(summary.split()) >= 5:
            return summary, "model"
        structural = structural_summary(question, plan_steps, trace_text, answer, verdict)
        return cap_words(structural, self.summary_max_words), "structural"

    def consolidate(
        self,
        *,
        question: str,
        caption: str | None,
        plan_text: str,
        plan_steps: list[str],
        trace_text: str,
        answer: str,
        verdict: str,
        namespace: str,
        provenance: dict,
        keep_contrast: bool = False,
        compress: bool = True,
    ) -> Consolidation:
        """Store the trajectory as a memory. compress=False keeps it as a plain case (plan + outcome)
        instead of a model-written workflow summary."""
        if compress:
            summary, source = self.summarise(question, plan_steps, trace_text, answer, verdict)
        else:
            summary, source = cap_words(case_summary(plan_steps, answer, verdict), self.summary_max_words), "case"
        question_type = self.classify(question)
        memory = self.store.add(
            NewMemory(
                question=question,
                summary=summary,
                plan=plan_text,
                correct=verdict == "correct",
                namespace=namespace,
                caption=caption,
                question_type=question_type,
                provenance={**provenance, "summary_source": source},
            ),
            keep_contrast=keep_contrast,
        )
        return Consolidation(memory=memory, summary_source=source)
