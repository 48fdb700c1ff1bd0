"""One label for a run and its memory, in the same words everywhere: the trace, the report, the Memory
view, History and the events.

A run's label is, in order: its own memory's (the memory a person relabels, confirms or corrects), the
person's latest feedback on it, else its verdict. Each is put in words by one function from the same
facts, "correct (you confirmed it)", "incorrect (you corrected it)", "unsure (the Judge's opinion,
unverified)", so a run the person confirmed right never reads "incorrect" in its report while the
Memory view calls it a successful strategy. Feedback records how the person decided (`feedback_how`,
in the memory's provenance) so the memory's words are the feedback's.
"""

from __future__ import annotations

from backend.judge import STATED_BY_IMAGE
from memory_db.provenance import read_provenance

CORRECT, INCORRECT = "correct", "incorrect"
LABELS = ("correct", "incorrect", "unsure", "not_attempted")
CONFIRMED, CORRECTED, MARKED_WRONG = "you confirmed it", "you corrected it", "you marked it wrong"
RELABELLED = "you relabelled it in Memory"
BY_GROUND_TRUTH = "verified against the right answer"
BY_JUDGE = "the Judge's opinion, unverified"
BY_IMAGE = "your image's text states it, unverified"
RECALLED_METHODS = ("the answer you typed", "your thumbs up")  # a recalled answer's verdict method (backend.taught)


def label_words(label: str, how: str) -> str:
    """'correct (you confirmed it)': the label and how it was reached, as every view shows it."""
    return f"{label} ({how})" if how else label


def person_how(label: str, *, right_answer: str | None) -> str:
    """How a person's feedback decided `label`: a right answer the Judge found the run's answer to be is
    a confirmation, another one a correction; a thumbs up confirms, a thumbs down marks it wrong."""
    if label == CORRECT:
        return CONFIRMED
    return CORRECTED if right_answer else MARKED_WRONG


def verdict_how(source: str | None, method: str) -> str:
    """How a verdict was reached, in words (VerdictReady's source and method)."""
    if source == "feedback":  # a person's earlier answer, recalled: its method names it ("the answer you typed on ...")
        return f"from {method}"
    if source == "person":
        return RELABELLED
    if source == "ground_truth":
        return BY_GROUND_TRUTH
    return BY_IMAGE if method == STATED_BY_IMAGE else BY_JUDGE


def verdict_words(verdict) -> str:
    """A run's verdict (VerdictReady) in words."""
    return label_words(verdict.label, verdict_how(verdict.source, verdict.method))


def feedback_words(item) -> str:
    """A person's feedback on a run (backend.feedback_queue.FeedbackItem) in words."""
    return label_words(item.label_after, person_how(item.label_after, right_answer=item.right_answer))


def memory_words(memory) -> str:
    """A memory's label in words, from its provenance: the person's feedback on it, their relabel in the
    Memory view, or the verdict of the run that stored it."""
    p = read_provenance(memory.provenance)
    source = p.verdict_source
    label = CORRECT if memory.correct else INCORRECT

    def recorded(value: str) -> str:  # "unsure" or "not_attempted" where the memory only says not correct
        return value if value in LABELS and (value == CORRECT) == memory.correct else label

    if source == "feedback":
        if p.feedback_how in (CONFIRMED, CORRECTED, MARKED_WRONG):
            return label_words(recorded(p.feedback_label), p.feedback_how)
        if p.judge_method.startswith(RECALLED_METHODS):  # a run answered from a person's earlier answer
            return label_words(recorded(p.judge_verdict), verdict_how("feedback", p.judge_method))
        typed = p.taught_answer if p.taught_how == "typed" else None  # feedback given before it said how
        return label_words(label, person_how(label, right_answer=typed))
    if source == "person":
        return label_words(label, RELABELLED)
    if source == "ground_truth":
        return label_words(recorded(p.judge_verdict), BY_GROUND_TRUTH)
    judged = p.judge_verdict if p.judge_verdict in LABELS else label  # the Judge alone: its own label
    return label_words(judged, verdict_how("judge", p.judge_method))


def is_runs_own(memory, run_id: str) -> bool:
    """Whether `memory` was stored by the run `run_id` (not an earlier run's memory it was counted on)."""
    return bool(run_id) and read_provenance(memory.provenance).run_id == run_id


def run_words(verdict, feedback=None, memory=None) -> str | None:
    """A run's label in words: its own memory's (`memory`, when the run stored it), else the person's
    feedback, else its verdict; None for a run without a verdict (stopped, failed, under way)."""
    if memory is not None:
        return memory_words(memory)
    if feedback is not None and (feedback.thumbs is not None or feedback.right_answer is not None):
        return feedback_words(feedback)
    return verdict_words(verdict) if verdict is not None else None
