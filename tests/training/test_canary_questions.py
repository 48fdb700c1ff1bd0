"""The test-time learning canary's questions: the last rows of train, so that no Planner version is
promoted on a question an evaluation (dev) holds, and each can be found in the search corpus."""

from __future__ import annotations

from backend.eval.datasets import load_questions
from tests.training.conftest import CANARY, REPO
from training.ttrl.canary import load_canary

HOTPOTQA = REPO / "data" / "hotpotqa"


def test_the_canary_is_the_last_ten_questions_of_train():
    canary = load_canary(CANARY, 10)
    train = load_questions(HOTPOTQA / "train.jsonl")
    assert len(CANARY.read_text(encoding="utf-8").splitlines()) == 10
    assert canary == train[-10:]


def test_no_canary_question_is_evaluated_or_a_reading_example():
    canary = {q.id for q in load_canary(CANARY, 10)} | {q.question for q in load_canary(CANARY, 10)}
    questions = load_questions(HOTPOTQA / "dev.jsonl")
    assert not canary & ({q.id for q in questions} | {q.question for q in questions})
    from training.reader_data import CANARY_ROWS, read_records

    records = read_records([HOTPOTQA / "train.jsonl", HOTPOTQA / "train-extra.jsonl"],
                           skip_last={"train.jsonl": CANARY_ROWS})
    assert not canary & {r["id"] for r in records}
