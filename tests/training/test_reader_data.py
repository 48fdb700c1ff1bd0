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
