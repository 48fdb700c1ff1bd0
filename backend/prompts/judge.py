"""The Judge's prompts: the grader (with ground truth), the three evaluators and the arbiter (without)."""

from __future__ import annotations

GRADER_SYSTEM = (
    "You grade answers. An answer is correct when it states the gold answer (extra hedging is fine); "
    "it is incorrect when it contradicts or misses the gold answer."
)
GRADER_TURN = "Question: {question}\nGold answer: {gold}\nAnswer: {answer}\nIs the answer correct? Reply correct or incorrect."

EVALUATOR_SYSTEM = "You evaluate research answers strictly."
EVALUATORS = {
    "reasoning": "Is the research reasoning consistent, with no step contradicting another?",
    "sourcing": "Is every fact in the answer supported by the retrieved evidence (no hallucination)?",
    "validity": "Does the answer actually answer the question that was asked?",
}
EVALUATION_CONTEXT = "Question: {question}\nEvidence:\n{evidence}\nAnswer: {answer}\n"
EVALUATOR_TURN = "{context}{criterion} Reply yes or no."

# The arbiter shares the evaluators' system text and context, so a local model's prompt cache
# serves its prompt up to the votes.
ARBITER_TURN = ("{context}You are the arbiter of three evaluators. Evaluator votes: {votes}.\n"
                "Is the answer correct? Reply correct or incorrect.")


def grading_messages(question: str, gold: str, answer: str) -> list[dict]:
    return [
        {"role": "system", "content": GRADER_SYSTEM},
        {"role": "user", "content": GRADER_TURN.format(question=question, gold=gold, answer=answer)},
    ]


def _context(question: str, evidence: str, answer: str) -> str:
    return EVALUATION_CONTEXT.format(question=question, evidence=evidence or "(none)", answer=answer)


def evaluator_messages(question: str, evidence: str, answer: str, criterion: str) -> list[dict]:
    context = _context(question, evidence, answer)
    return [
        {"role": "system", "content": EVALUATOR_SYSTEM},
        {"role": "user", "content": EVALUATOR_TURN.format(context=context, criterion=criterion)},
    ]


def arbiter_messages(question: str, evidence: str, answer: str, votes: list[str]) -> list[dict]:
    context = _context(question, evidence, answer)
    return [
        {"role": "system", "content": EVALUATOR_SYSTEM},
        {"role": "user", "content": ARBITER_TURN.format(context=context, votes="; ".join(votes))},
    ]
