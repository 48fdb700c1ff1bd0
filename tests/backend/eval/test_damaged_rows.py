"""A rows file with a question twice, or a row that is not whole, is refused with the file and the
line wherever it is read: the summary, the comparison and resuming the evaluation. Nothing is
counted twice, and no damaged value reaches the arithmetic of a summary."""

from __future__ import annotations

import json

import pytest

from backend.eval.__main__ import main
from backend.eval.report import SUMMARY_JSON
from backend.eval.results import EvalRow, ResultsError, ResultsFile
from backend.eval.spec import ROWS_FILE, EvalSpec, check_or_write_manifest

from .conftest import DEV
from .test_results_and_summary import make_row

QUESTIONS = 6


def rows_line(position: int, **change) -> str:
    row = json.loads(make_row(position, correct=position % 2 == 0, wall=2.0, llm=1.5, tool=0.4).to_json())
    row.update(change)
    return json.dumps(row)


@pytest.fixture
def folder(tmp_path, eval_config):
    """A finished evaluation folder of 6 questions, as the harness writes one."""
    out = tmp_path / "none-dev"
    check_or_write_manifest(EvalSpec(data=DEV, method="none", out_dir=out, limit=QUESTIONS), eval_config)
    results = ResultsFile(out / ROWS_FILE)
    for index in range(QUESTIONS):
        results.append(EvalRow.from_dict(json.loads(rows_line(index))))
    return out


def refused(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


def test_a_question_twice_is_refused_by_the_summary_the_comparison_and_a_resume(folder, tmp_path, capsys,
                                                                                eval_config_file):
    rows = folder / ROWS_FILE
    with rows.open("a", encoding="utf-8") as fp:
        fp.write(rows_line(2) + "\n")  # the third question's row again: 7 rows for 6 questions
    said = f"error: {rows}, line 7: question 'q2' already has a row on line 3; keep one of the two lines and remove the other.\n"

    assert refused(["--summarize", str(folder)], capsys) == said
    assert not (folder / SUMMARY_JSON).exists()
    assert refused(["--compare", str(folder), "--out", str(tmp_path / "cmp")], capsys) == said
    resume = ["--config", str(eval_config_file), "--data", str(DEV), "--method", "none", "--out", str(folder),
              "--limit", str(QUESTIONS), "--no-progress"]
    assert refused(resume, capsys) == said


def test_two_rows_at_one_position_are_refused(folder):
    rows = folder / ROWS_FILE
    lines = rows.read_text(encoding="utf-8").splitlines()
    lines[4] = rows_line(4, index=1)  # another question's row, written at the second one's position
    rows.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ResultsError, match=r"line 5: position 1 already has a row on line 2;"):
        ResultsFile(rows).read()


@pytest.mark.parametrize(("line", "why"), [
    (rows_line(5, correct="yes"), 'correct must be true or false, not "yes"'),
    (rows_line(5, wall_seconds=None), "wall_seconds must be a number, not null"),
    (rows_line(5, index=-1), "index must be 0 or more, not -1"),
    (rows_line(5, memory_ids="m1"), 'memory_ids must be a list of texts, not "m1"'),
    (json.dumps({k: v for k, v in json.loads(rows_line(5)).items() if k not in ("gold", "em")}), "it lacks gold, em"),
    ("[1, 2]", "not a JSON object"),
])
def test_a_tampered_row_is_refused_naming_its_line_and_what_is_wrong(folder, capsys, line, why):
    rows = folder / ROWS_FILE
    lines = rows.read_text(encoding="utf-8").splitlines()
    for at in (2, len(lines) - 1):  # in the middle, and as the last line (no torn write: it is whole JSON)
        damaged = lines[:at] + [line] + lines[at + 1:]
        rows.write_text("\n".join(damaged) + "\n", encoding="utf-8")
        assert refused(["--summarize", str(folder)], capsys) == (
            f"error: {rows}, line {at + 1}: not a complete result row ({why}); remove that line and run the "
            "evaluation again, which asks its question again.\n")
        assert len(rows.read_text(encoding="utf-8").splitlines()) == len(lines)  # nothing cut off the file


def test_the_whole_folder_still_summarises(folder, capsys):
    assert main(["--summarize", str(folder)]) == 0
    summary = json.loads((folder / SUMMARY_JSON).read_text(encoding="utf-8"))["summary"]
    assert summary["questions"] == QUESTIONS and summary["correct"] == 3
