"""The rows file (append, resume after a torn write) and the summary computed from it."""

from __future__ import annotations

import dataclasses

import json

import pytest

from backend.eval.report import summarize
from backend.eval.results import EvalRow, ResultsError, ResultsFile


def make_row(index: int, *, correct: bool, wall: float, llm: float, tool: float, error: str | None = None, **extra) -> EvalRow:
    values = dict(
        index=index, id=f"q{index}", question=f"Question {index}?", gold="Tulsa",
        answer="Tulsa" if correct else "Paris", verdict="correct" if correct else "incorrect",
        judge_method="exact-match", correct=correct, em=float(correct), f1=float(correct),
        llm_calls=4, prompt_tokens=100, completion_tokens=20, tool_calls=1,
        wall_seconds=wall, llm_seconds=llm, tool_seconds=tool, other_seconds=round(wall - llm - tool, 3),
        harness_seconds=wall + 0.01, memories_used=index, error=error,
    )
    values.update(extra)
    return EvalRow(**values)


def test_rows_round_trip_in_order(tmp_path):
    results = ResultsFile(tmp_path / "rows.jsonl")
    rows = [make_row(i, correct=i % 2 == 0, wall=2.0, llm=1.5, tool=0.4) for i in range(3)]
    for row in rows:
        results.append(row)
    assert results.read() == rows


def test_half_written_last_line_is_dropped_and_appending_continues(tmp_path):
    path = tmp_path / "rows.jsonl"
    results = ResultsFile(path)
    first, second = make_row(0, correct=True, wall=1, llm=1, tool=0), make_row(1, correct=False, wall=1, llm=1, tool=0)
    results.append(first)
    path.write_bytes(path.read_bytes() + second.to_json().encode()[:40])  # the process died mid-write
    assert results.read() == [first]
    assert path.read_text(encoding="utf-8") == first.to_json() + "\n"
    results.append(second)
    assert results.read() == [first, second]


def test_complete_last_row_without_newline_is_kept_and_closed(tmp_path):
    path = tmp_path / "rows.jsonl"
    first = make_row(0, correct=True, wall=1, llm=1, tool=0)
    path.write_text(first.to_json(), encoding="utf-8")
    results = ResultsFile(path)
    assert results.read() == [first]
    second = make_row(1, correct=True, wall=1, llm=1, tool=0)
    results.append(second)
    assert results.read() == [first, second]


def test_damage_before_the_last_line_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    row = make_row(0, correct=True, wall=1, llm=1, tool=0)
    path.write_text(row.to_json() + "\n{broken\n" + row.to_json() + "\n", encoding="utf-8")
    with pytest.raises(ResultsError, match="line 2: not a result row"):
        ResultsFile(path).read()


def test_summary_numbers_from_hand_made_rows():
    rows = [
        make_row(0, correct=True, wall=10.0, llm=9.0, tool=0.6),
        make_row(1, correct=False, wall=20.0, llm=18.0, tool=1.0),
        make_row(2, correct=True, wall=30.0, llm=28.0, tool=1.4),
        make_row(3, correct=False, wall=40.0, llm=0.0, tool=0.0, error="model crashed", verdict="failed"),
    ]
    s = summarize(rows)
    assert s["questions"] == 4 and s["correct"] == 2 and s["accuracy"] == 0.5
    assert s["verdicts"] == {"correct": 2, "incorrect": 1, "failed": 1}
    assert s["failed_runs"] == 1
    # latency over all rows: 10, 20, 30, 40 -> p50 25, p95 at rank 2.85 -> 30 + 0.85 * 10
    assert s["latency_p50_s"] == 25.0 and s["latency_p95_s"] == pytest.approx(38.5)
    assert s["first_answer_p50_s"] != s["first_answer_p50_s"]  # NaN: no row says when its first answer came
    s = summarize([dataclasses.replace(r, first_answer_seconds=t) for r, t in zip(rows, (4.0, None, 8.0, None))])
    assert s["first_answer_p50_s"] == 6.0  # over the rows that say
    # the time split leaves the failed run out: wall 60, llm 55, tool 3, other 2
    t = s["time_split"]
    assert (t["runs"], t["wall_s"], t["llm_s"], t["tool_s"]) == (3, 60.0, 55.0, 3.0)
    assert t["other_s"] == pytest.approx(2.0) and t["overhead_share"] == pytest.approx(2 / 60, abs=1e-4)
    assert s["per_question"]["memories_used"] == 1.5  # (0 + 1 + 2 + 3) / 4
    assert s["per_question"]["prompt_tokens"] == 100
    assert s["learning_curve"] == pytest.approx([1.0, 0.5, 2 / 3, 0.5], abs=1e-4)
    json.dumps(s)  # the summary is plain JSON
