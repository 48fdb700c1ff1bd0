"""Reading question streams: HotpotQA and plain JSONL, with clear errors for bad files."""

from __future__ import annotations

import json
import re

import pytest

from backend.eval.datasets import DatasetError, load_questions

from .conftest import DEV


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_hotpotqa_file_in_order_with_limit():
    first_three = [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines()[:3]]
    questions = load_questions(DEV, limit=3)
    assert [q.id for q in questions] == [r["id"] for r in first_three]
    assert [q.answer for q in questions] == [r["answer"] for r in first_three]
    assert questions[0].question.startswith('The band who released the debut album "Tinted Windows"')
    assert len(load_questions(DEV)) == 300


def test_plain_file_with_relative_image(tmp_path):
    from PIL import Image

    Image.new("RGB", (4, 4), "red").save(tmp_path / "flag.png")
    path = write_lines(tmp_path / "q.jsonl", [
        json.dumps({"id": 7, "question": "Which flag is this?", "answer": "Japan", "image": "flag.png"}),
        "",
        json.dumps({"id": "b", "question": "Capital of France?", "answer": "Paris"}),
    ])
    first, second = load_questions(path)
    assert first.id == "7" and first.image == str(tmp_path / "flag.png")
    assert second.image is None and second.answer == "Paris"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "a", "question": "Q?"}'], "line 1: 'answer' must be a non-empty text"),
        (['{"id": "a", "question": "Q?", "answer": "A"}', "not json"], "line 2: not valid JSON"),
        (['["a list"]'], "expected a JSON object"),
        (['{"id": "a", "question": "Q?", "answer": "A"}', '{"id": "a", "question": "R?", "answer": "B"}'],
         "id 'a' already used on line 1"),
        (['{"id": "a", "question": "Q?", "answer": "A", "image": "missing.png"}'], "missing.png does not exist"),
        ([""], "holds no questions"),
    ],
)
def test_bad_files_name_the_line_and_the_fix(tmp_path, lines, message):
    path = write_lines(tmp_path / "bad.jsonl", lines)
    with pytest.raises(DatasetError, match=re.escape(message)):
        load_questions(path)


def test_missing_file_and_bad_limit(tmp_path):
    with pytest.raises(DatasetError, match="no such question file"):
        load_questions(tmp_path / "nope.jsonl")
    with pytest.raises(DatasetError, match="at least 1"):
        load_questions(DEV, limit=0)


def test_skip_takes_the_questions_after_the_first_ones():
    first_five = load_questions(DEV, limit=5)
    assert load_questions(DEV, skip=2, limit=3) == first_five[2:]
    assert len(load_questions(DEV, skip=290)) == 10
    with pytest.raises(DatasetError, match="holds 300 questions, none after the first 300"):
        load_questions(DEV, skip=300)
    with pytest.raises(DatasetError, match="--skip must be 0 or more"):
        load_questions(DEV, skip=-1)


def test_hidden_titles_are_read_and_checked(tmp_path):
    path = write_lines(tmp_path / "q.jsonl", [
        json.dumps({"id": "a", "question": "Q?", "answer": "A", "hide_titles": ["Fyre Festival", " Kevin Loader "]}),
        json.dumps({"id": "b", "question": "R?", "answer": "B"}),
    ])
    first, second = load_questions(path)
    assert first.hidden_titles == ("Fyre Festival", "Kevin Loader") and second.hidden_titles == ()
    bad = write_lines(tmp_path / "bad.jsonl", [json.dumps({"id": "a", "question": "Q?", "answer": "A", "hide_titles": "Fyre"})])
    with pytest.raises(DatasetError, match=re.escape("line 1: 'hide_titles' must be a list of wiki article titles")):
        load_questions(bad)
