"""The reader's training examples, built on real `train` rows by the app's own session: the prompt is
the reader's, the trained text is what the supporting facts state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.answer_match import normalize_answer
from backend.evidence import closed_options
from backend.llm.base import ModelTraits
from backend.llm.embedded import EMBEDDED_TRAITS
from backend.prompts import executor as prompts
from training.__main__ import main as training_main
from training.reader_data import (
    ReaderDataError,
    answer_sentence,
    load_rows,
    read_records,
    reading_examples,
    split_of,
    write_rows,
)

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "data" / "hotpotqa" / "train.jsonl"
QWEN_TRAITS = ModelTraits(small=False, guided_turns=True, context_tokens=4096, executor_turns=4)


def rows_of(kind: str, n: int) -> list[dict]:
    records = [json.loads(line) for line in TRAIN.read_text(encoding="utf-8").splitlines()]
    if kind == "open":
        return [r for r in records if not closed_options(r["question"]) and answer_sentence(r)][:n]
    return [r for r in records if closed_options(r["question"])][:n]


def trained_text(example) -> str:
    return "".join(s["text"] for s in example.segments if s["train"])


def test_an_open_question_is_read_by_quote_from_the_searched_conversation():
    built = 0
    for record in rows_of("open", 12):
        examples = reading_examples(record, QWEN_TRAITS)
        if not examples:
            continue
        built += 1
        (example,) = examples
        prompt = "\n".join(m["content"] for m in example.messages)
        assert example.messages[0]["content"].startswith("You answer questions by research.")  # the Executor's own turn
        assert "<tool_response>" in prompt and "Copy the sentence from the search results above" in prompt
        texts = [s["text"] for s in example.segments]
        trained = [s["train"] for s in example.segments]
        assert texts[0] == prompts.QUOTE_PREFILL and trained == [False, True, False, True]
        assert texts[2] == "\n" + prompts.ANSWER_PREFILL and example.segments[-1].get("end")
        quote = texts[1].strip()
        assert quote in " ".join(prompt.split())  # quoted from what the reader sees
        assert normalize_answer(texts[3]) == normalize_answer(record["answer"])
        assert normalize_answer(record["answer"]) in normalize_answer(quote)
    assert built >= 6  # most open questions have the answer's sentence in view


def test_a_comparison_copies_each_options_fact_then_chooses_or_decides():
    built = []
    for record in rows_of("closed", 16):
        built += reading_examples(record, QWEN_TRAITS)
    assert built
    for example in built:
        assert any(prompts.ANSWER_PREFILL in s["text"] or s["text"].rstrip().endswith(":") for s in example.segments)
        options = closed_options(example.question)
        if options != ["yes", "no"]:
            prefills = [s["text"] for s in example.segments if not s["train"]]
            assert prefills[0].strip().rstrip(":") in options  # the first option's fact comes first
    answers = [e for e in built if e.segments[-1]["text"].strip() in closed_options(e.question)]
    assert answers, "some comparison is decided by the choice after the facts"


def test_a_small_model_reads_selected_evidence_plainly():
    record = rows_of("open", 1)[0]
    (example,) = reading_examples(record, EMBEDDED_TRAITS)
    assert example.messages[0]["content"] == prompts.READER_SYSTEM
    assert example.messages[1]["content"].startswith("Evidence:")
    assert [s["train"] for s in example.segments] == [False, True]
    assert example.segments[0]["text"] == prompts.ANSWER_PREFILL


def test_a_question_whose_facts_do_not_state_the_answer_gives_no_example():
    record = dict(rows_of("open", 1)[0], answer="a phrase no paragraph holds")
    assert reading_examples(record, QWEN_TRAITS) == []


def test_the_validation_split_is_stable_and_about_a_tenth():
    records = read_records([TRAIN])
    splits = [split_of(r["id"]) for r in records]
    assert splits == [split_of(r["id"]) for r in records]
    assert 15 <= splits.count("validation") <= 50


def test_evaluation_files_are_refused(tmp_path):
    dev = tmp_path / "dev.jsonl"
    dev.write_text(TRAIN.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    with pytest.raises(ReaderDataError, match="evaluation split"):
        read_records([dev])


def test_the_command_writes_rows_that_load_back(tmp_path, capsys):
    out = tmp_path / "examples.jsonl"
    assert training_main(["reader-data", "--hotpotqa", str(TRAIN), "--limit", "6", "--model", "smollm2",
                          "--out", str(out)]) == 0
    rows = load_rows(out)
    assert rows and {r["source"] for r in rows} == {"supporting-facts"}
    assert "sha256" in capsys.readouterr().out
    broken = tmp_path / "broken.jsonl"
    write_rows([{"messages": [], "segments": [{"text": "x", "train": False}], "split": "train"}], broken)
    with pytest.raises(ReaderDataError, match="broken.jsonl:1"):
        load_rows(broken)


def log_searched_run(runlog, namespace: str, run_id: str, record: dict, answer: str) -> None:
    """A finished run as the app logs it: its searches of the question's supporting titles and what
    they returned (each supporting paragraph and one distractor)."""
    from backend.events import AnswerReady, RunFinished, RunStarted, ToolCalled, ToolReturned

    paragraphs = dict(zip(record["context"]["title"], ("".join(s) for s in record["context"]["sentences"])))
    events = [RunStarted(run_id, question=record["question"], namespace=namespace)]
    distractor = next(t for t in paragraphs if t not in record["supporting_facts"]["title"])
    for turn, title in enumerate(dict.fromkeys(record["supporting_facts"]["title"]), 1):
        passages = [{"title": t, "text": paragraphs[t], "source": "wiki:hotpotqa", "score": 1.0} for t in (title, distractor)]
        events += [ToolCalled(run_id, turn=turn, name="search", arguments={"query_list": [title]}),
                   ToolReturned(run_id, turn=turn, name="search", ok=True, content="...", passages=passages)]
    events += [AnswerReady(run_id, text=answer), RunFinished(run_id, answer=answer)]
    for event in events:
        runlog.append(namespace, event)


def test_a_deployments_verified_runs_become_reading_examples_of_their_own_namespace(tmp_path):
    from backend.feedback import FeedbackItem, FeedbackQueue
    from backend.runlog import RunLog
    from memory_db import MemoryStore
    from training.reader_data import verified_run_examples

    first, second, third = rows_of("open", 3)
    runlog = RunLog(tmp_path / "runs")
    log_searched_run(runlog, "alice", "typed", first, "a wrong guess")  # the person typed the right answer
    log_searched_run(runlog, "alice", "thumbs", second, second["answer"])  # thumbs-up on the right answer
    log_searched_run(runlog, "alice", "down", third, third["answer"])  # thumbs-down: not verified
    log_searched_run(runlog, "bob", "bobs", third, third["answer"])  # another namespace's thumbs-up
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}")
    queue = FeedbackQueue(store)
    for run_id, namespace, thumbs, right in [("typed", "alice", None, first["answer"]), ("thumbs", "alice", "up", None),
                                             ("down", "alice", "down", None), ("bobs", "bob", "up", None)]:
        queue.append(FeedbackItem(run_id=run_id, namespace=namespace, user="u", question="q", answer="a", thumbs=thumbs,
                                  right_answer=right, comment=None, label_before="incorrect", label_after="correct",
                                  judge_method="thumbs", memory_id=None))
    store.close()
    examples = verified_run_examples(tmp_path, "alice", QWEN_TRAITS)
    assert {e.id for e in examples} == {"run:alice/typed", "run:alice/thumbs"}
    assert {e.source for e in examples} == {"verified-runs"}
    for example in examples:
        record = first if example.id.endswith("typed") else second
        quote, answer = example.segments[1]["text"], example.segments[3]["text"]
        assert normalize_answer(answer) == normalize_answer(record["answer"])
        assert " ".join(quote.split()) in " ".join(" ".join(m["content"] for m in example.messages).split())
