"""The test-time learning canary's questions: the last rows of the training-only train-extra, so that
no Planner version is promoted on a question an evaluation (dev) or the training set (train) holds."""

from __future__ import annotations

from backend.eval.datasets import load_questions
from tests.training.conftest import CANARY, REPO
from training.ttrl.canary import load_canary

HOTPOTQA = REPO / "data" / "hotpotqa"


def test_the_canary_is_the_last_ten_questions_of_train_extra():
    canary = load_canary(CANARY, 10)
    extra = load_questions(HOTPOTQA / "train-extra.jsonl")
    assert len(CANARY.read_text(encoding="utf-8").splitlines()) == 10
    assert canary == extra[-10:]


def test_no_canary_question_is_evaluated_or_in_train():
    canary = {q.id for q in load_canary(CANARY, 10)} | {q.question for q in load_canary(CANARY, 10)}
    for split in ("dev", "train"):
        questions = load_questions(HOTPOTQA / f"{split}.jsonl")
        assert not canary & ({q.id for q in questions} | {q.question for q in questions}), split
