"""The Judge: grades an answer with ground truth, or without it by three evaluators and an arbiter.

Every label is a constrained choice between fixed options (log-probabilities on the embedded
model, guided choice on a served one); no label is parsed out of free text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.answer_match import answer_contains, normalize_answer, shares_a_word  # noqa: F401  (re-exported)
from backend.evidence import closed_options
from backend.llm.base import ChatModel

CORRECT, INCORRECT, NOT_ATTEMPTED = "correct", "incorrect", "not_attempted"

GRADER_SYSTEM = (
    "You grade answers. An answer is correct when it states the gold answer (extra hedging is fine); "
    "it is incorrect when it contradicts or misses the gold answer."
)

EVALUATORS = {
    "reasoning": "Is the research reasoning consistent, with no step contradicting another?",
    "sourcing": "Is every fact in the answer supported by the retrieved evidence (no hallucination)?",
    "validity": "Does the answer actually answer the question that was asked?",
}


@dataclass
class Verdict:
    label: str
    method: str
    feedback: list[str] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return self.label == CORRECT


def _grading_messages(question: str, gold: str, answer: str) -> list[dict]:
    return [
        {"role": "system", "content": GRADER_SYSTEM},
        {
            "role": "user",
            "content": f"Question: {question}\nGold answer: {gold}\nAnswer: {answer}\n"
            "Is the answer correct? Reply correct or incorrect.",
        },
    ]


class Judge:
    """`require_overlap`: with a tiny grader, an answer sharing no word with the gold answer is
    incorrect without asking the model (its yes/no on unrelated strings is noise)."""

    def __init__(self, model: ChatModel, *, require_overlap: bool = False) -> None:
        self.model = model
        self.require_overlap = require_overlap

    def grade(self, question: str, answer: str, ground_truth: str) -> Verdict:
        if not answer.strip():
            return Verdict(NOT_ATTEMPTED, "empty-answer")
        closed = self._grade_closed(question, answer, ground_truth)
        if closed is not None:
            return closed
        if answer_contains(answer, ground_truth):
            return Verdict(CORRECT, "exact-match")
        if self.require_overlap and not shares_a_word(answer, ground_truth):
            return Verdict(INCORRECT, "no-overlap", ["the answer shares no word with the gold answer"])
        options = [CORRECT, INCORRECT]
        choice = self.model.choose(_grading_messages(question, ground_truth, answer), options)
        # Contextual calibration: subtract each label's score on a content-free answer, so a
        # model's prior preference for one label does not decide the verdict.
        prior = self.model.choose(_grading_messages(question, ground_truth, "N/A"), options)
        calibrated = {o: choice.logprobs[o] - prior.logprobs[o] for o in options}
        label = max(options, key=lambda o: calibrated[o])
        scores = ", ".join(f"{k} {v:+.2f}" for k, v in calibrated.items())
        return Verdict(label, f"llm-choice ({choice.method}, calibrated)", [f"grader calibrated log-probabilities: {scores}"])

    @staticmethod
    def _grade_closed(question: str, answer: str, ground_truth: str) -> Verdict | None:
        """A closed question ("A or B?", yes/no) whose gold is one of its options is graded by the option
        the answer names: "yes" is never right for "no". None when the answer names both options
        (left to the other rules) or the gold is not among the options."""
        options = closed_options(question)
        gold = next((o for o in options if normalize_answer(o) == normalize_answer(ground_truth)), None)
        if gold is None:
            return None
        named = [o for o in options if answer_contains(answer, o)]
        if len(named) > 1:
            return None
        if named == [gold]:
            return Verdict(CORRECT, "closed-choice")
        chose = f"names {named[0]!r}" if named else "names none of them"
        return Verdict(INCORRECT, "closed-choice", [f"the question allows {' or '.join(options)}; the answer {chose}"])

    def evaluate_without_ground_truth(self, question: str, answer: str, evidence: str) -> Verdict:
        """Three evaluators vote pass/fail; the arbiter sees their votes and decides."""
        if not answer.strip():
            return Verdict(NOT_ATTEMPTED, "empty-answer")
        feedback, votes = [], []
        context = f"Question: {question}\nEvidence:\n{evidence or '(none)'}\nAnswer: {answer}\n"
        for name, criterion in EVALUATORS.items():
            choice = self.model.choose(
                [
                    {"role": "system", "content": "You evaluate research answers strictly."},
                    {"role": "user", "content": f"{context}{criterion} Reply yes or no."},
                ],
                ["yes", "no"],
            )
            verdict = "pass" if choice.label == "yes" else "fail"
            votes.append(f"{name}: {verdict}")
            feedback.append(f"{name}: {verdict} ({criterion})")
        arbiter = self.model.choose(
            [
                {"role": "system", "content": "You are the arbiter of three evaluators."},
                {"role": "user", "content": f"{context}Evaluator votes: {'; '.join(votes)}.\nIs the answer correct? Reply correct or incorrect."},
            ],
            [CORRECT, INCORRECT],
        )
        return Verdict(arbiter.label, "evaluators+arbiter", feedback)
