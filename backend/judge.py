"""The Judge: grades an answer with ground truth, or without it by three evaluators and an arbiter.

Every label is a constrained choice between fixed options (log-probabilities on the embedded
model, guided choice on a served one); no label is parsed out of free text. A verdict says how it
was reached. Against ground truth it is verified; the model grader may call an answer correct only
when it shares a word with the gold answer (otherwise "unsure"). Without ground truth the verdict
is the Judge's opinion, unverified, and never "correct": measured on hand-labelled runs
(benchmarks/judge_quality.py), the arbiter's "correct" was right a third of the time, and its
confidence did not separate right from wrong, so it says "unsure" and records which way it leant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from backend.answer_match import answer_contains, normalize_answer, same_answer_contained, shares_a_word  # noqa: F401  (re-exported)
from backend.answer_kind import kind_problem, says_not_of_kind
from backend.evidence import select_evidence, stating_sentence
from backend.llm.base import ChatModel
from backend.prompts import judge as prompts
from backend.question import Question

CORRECT, INCORRECT, NOT_ATTEMPTED, UNSURE = "correct", "incorrect", "not_attempted", "unsure"
LABELS = (CORRECT, INCORRECT, NOT_ATTEMPTED, UNSURE)

# Where a verdict came from; only the first two are verified.
FROM_GROUND_TRUTH, FROM_FEEDBACK, FROM_JUDGE = "ground_truth", "feedback", "judge"

# Answers that hold no answer at all: a forced turn's empty prefix, a refusal, a placeholder.
_PLACEHOLDERS = {
    "answer", "the answer is", "answer is", "final answer", "n a", "na", "none", "unknown", "not known",
    "i dont know", "i do not know", "no answer", "cannot be determined", "not enough information",
    "insufficient information", "not stated", "not mentioned",
}
# Words an answer cannot end on when it is complete ("The music festival in", "Tulsa and").
_DANGLING = {"the", "a", "an", "of", "in", "on", "at", "to", "for", "and", "or", "by", "with", "from", "is", "was"}
# An answer that negates something cannot take credit for naming the gold inside its claim
# ("No, Ed Sullivan never worked for The Ed Sullivan Show").
_NEGATIONS = {"no", "not", "never", "neither", "nor", "none", "nothing", "isnt", "wasnt", "didnt", "doesnt", "arent", "werent"}


@dataclass
class Verdict:
    label: str
    method: str
    feedback: list[str] = field(default_factory=list)
    source: str = FROM_GROUND_TRUTH
    confidence: float | None = None  # the Judge's probability of its label, where a model decided
    evidence: list[str] = field(default_factory=list)  # titles of the passages the Judge checked
    leaning: str | None = None  # for "unsure": the label the model chose before the Judge held back

    @property
    def correct(self) -> bool:
        return self.label == CORRECT

    @property
    def leans_correct(self) -> bool:
        """Correct, or unsure after the model chose correct: the signal of the paper's unsupervised mode."""
        return self.label == CORRECT or (self.label == UNSURE and self.leaning == CORRECT)

    @property
    def verified(self) -> bool:
        return self.source != FROM_JUDGE


STATED_BY_IMAGE = "stated by the question's image"  # the method of image_text_verdict's verdicts
ANSWER_KIND = "answer-kind"  # the method of a verdict on an answer of another kind than the question asks for
UNSTATED_CONFIDENCE = 0.5  # the most confidence the Judge gives an answer no retrieved sentence states


def image_text_verdict(source_title: str) -> Verdict:
    """The verdict on an answer read from the question's own image text before any research
    (agent.image_text_first): unverified and leaning correct, without the Judge's four calls. The
    text states it by construction; what nothing here can check is the image itself and OCR's
    reading, which only the person who sent it can confirm."""
    return Verdict(UNSURE, STATED_BY_IMAGE, [
        "unsure: the answer is what OCR read in the question's image; without ground truth only the person "
        "who sent it can confirm the image and the reading"], source=FROM_JUDGE, evidence=[source_title], leaning=CORRECT)


def answer_problem(question: str, answer: str) -> str | None:
    """Why `answer` holds no answer (empty, a placeholder, the question echoed, cut off), or None."""
    text = answer.strip()
    normalised = normalize_answer(text)
    if not normalised:
        return "the answer is empty"
    if normalised in _PLACEHOLDERS or normalised.rstrip(" :") in _PLACEHOLDERS:
        return f"the answer {text!r} is a placeholder, not an answer"
    if says_not_of_kind(text):
        return f"no answer of the kind the question asks for was found ({text})"
    question_words = normalize_answer(question)
    if normalised == question_words or (len(question_words) > 20 and question_words in normalised):
        return "the answer repeats the question"
    if text.endswith((":", ",", "(", "-")) or text.count("(") > text.count(")") or text.count('"') % 2:
        return "the answer is cut off"
    if normalised.split()[-1] in _DANGLING and len(normalised.split()) > 1:
        return "the answer is cut off"
    return None


def negates(answer: str) -> bool:
    return bool(set(normalize_answer(answer).split()) & _NEGATIONS)


def _probability(logprobs: dict[str, float], label: str) -> float | None:
    """The softmax probability of `label` among the options (an option scored -inf has none); None
    when the scores say nothing (the label unscored, or -inf minus -inf in a calibration)."""
    if label not in logprobs or not math.isfinite(logprobs[label]) or any(math.isnan(v) for v in logprobs.values()):
        return None
    top = max(logprobs.values())
    total = sum(math.exp(v - top) for v in logprobs.values())
    return math.exp(logprobs[label] - top) / total


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


class Judge:
    """`require_overlap`: with a tiny grader, an answer sharing no word with the gold answer is
    incorrect without asking the model (its yes/no on unrelated strings is noise)."""

    def __init__(self, model: ChatModel, *, require_overlap: bool = False) -> None:
        self.model = model
        self.require_overlap = require_overlap

    def grade(self, question: Question | str, answer: str, ground_truth: str) -> Verdict:
        """`question` as the episode parsed it, or its text (parsed here, once)."""
        question = Question.of(question)
        problem = answer_problem(question.text, answer)
        if problem is not None and normalize_answer(answer) and normalize_answer(answer) == normalize_answer(ground_truth):
            problem = None  # the gold answer itself, even where it looks cut off ("Finnmark county," in HotpotQA)
        if problem is not None:
            return Verdict(NOT_ATTEMPTED, "no-answer", [problem])
        closed = self._grade_closed(question, answer, ground_truth)
        if closed is not None:
            return closed
        if same_answer_contained(answer, ground_truth) and not negates(answer):
            return Verdict(CORRECT, "exact-match")
        if self.require_overlap and not shares_a_word(answer, ground_truth):
            return Verdict(INCORRECT, "no-overlap", ["the answer shares no word with the gold answer"])
        options = [CORRECT, INCORRECT]
        choice = self.model.choose(prompts.grading_messages(question.text, ground_truth, answer), options)
        # Contextual calibration: subtract each label's score on a content-free answer, so a
        # model's prior preference for one label does not decide the verdict.
        prior = self.model.choose(prompts.grading_messages(question.text, ground_truth, "N/A"), options)
        calibrated = {o: choice.logprobs[o] - prior.logprobs[o] for o in options}
        label = max(options, key=lambda o: calibrated[o])
        scores = ", ".join(f"{k} {v:+.2f}" for k, v in calibrated.items())
        feedback = [f"grader calibrated log-probabilities: {scores}"]
        if negates(answer) and answer_contains(answer, ground_truth):
            feedback.insert(0, "the answer names the gold answer inside a negation, so containment does not count")
        confidence = _rounded(_probability(calibrated, label))
        method = f"llm-choice ({choice.method}, calibrated)"
        if label == CORRECT and not shares_a_word(answer, ground_truth):
            # Measured: the grader's "correct" for an answer sharing no word with the gold was right
            # half the time ("Hawaii" for "Honolulu", a person for "husband and wife").
            feedback.append("unsure: the grader said correct, but the answer shares no word with the gold answer")
            return Verdict(UNSURE, method, feedback, confidence=confidence, leaning=CORRECT)
        return Verdict(label, method, feedback, confidence=confidence)

    @staticmethod
    def _grade_closed(question: Question, answer: str, ground_truth: str) -> Verdict | None:
        """A closed question ("A or B?", yes/no) whose gold is one of its options is graded by the option
        the answer names: "yes" is never right for "no". None when the answer names both options
        (left to the other rules) or the gold is not among the options."""
        options = list(question.options)
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

    def evaluate_without_ground_truth(self, question: Question | str, answer: str, passages: list[dict]) -> Verdict:
        """Three evaluators vote pass/fail and the arbiter decides; the verdict is unverified, and where
        the arbiter chose "correct" it is "unsure" (leaning correct): see the module's note. `question`
        as the episode parsed it, or its text (parsed here, once)."""
        question = Question.of(question)
        text = question.text
        titles = list(dict.fromkeys(p.get("title", "") for p in passages))[:8]
        problem = answer_problem(text, answer)
        if problem is not None:
            return Verdict(NOT_ATTEMPTED, "no-answer", [problem], source=FROM_JUDGE, evidence=titles)
        wrong_kind = kind_problem(question, answer)
        if wrong_kind is not None:  # decided without a model: "Moldova" for a capital city is no capital
            return Verdict(INCORRECT, ANSWER_KIND, [f"the answer is not of the kind the question asks for: {wrong_kind}"],
                           source=FROM_JUDGE, evidence=titles)
        evidence = select_evidence(text, passages, max_chars=1500, max_passage_chars=400)
        feedback, votes = [], []
        for name, criterion in prompts.EVALUATORS.items():
            choice = self.model.choose(prompts.evaluator_messages(text, evidence, answer, criterion), ["yes", "no"])
            vote = "pass" if choice.label == "yes" else "fail"
            votes.append(f"{name}: {vote}")
            feedback.append(f"{name}: {vote} ({criterion})")
        arbiter = self.model.choose(prompts.arbiter_messages(text, evidence, answer, votes), [CORRECT, INCORRECT])
        confidence = _rounded(_probability(arbiter.logprobs, arbiter.label))
        if arbiter.label != CORRECT:
            return Verdict(arbiter.label, "evaluators+arbiter", feedback, source=FROM_JUDGE, confidence=confidence,
                           evidence=titles)
        stated = question.closed or bool(stating_sentence(answer, text, passages))
        feedback.append("unsure: the arbiter said correct, but without ground truth the Judge cannot confirm it"
                        + ("" if stated else "; no retrieved sentence states this answer"))
        if not stated and confidence is not None and confidence > UNSTATED_CONFIDENCE:
            # An answer no retrieved sentence states was read from nothing the run found ("Moldova" for a
            # flag no caption named, at 0.95): the arbiter's certainty about it says nothing.
            feedback.append(f"confidence {confidence:.2f} capped at {UNSTATED_CONFIDENCE:.2f}: no evidence states the answer")
            confidence = UNSTATED_CONFIDENCE
        return Verdict(UNSURE, "evaluators+arbiter", feedback, source=FROM_JUDGE, confidence=confidence,
                       evidence=titles, leaning=CORRECT)
