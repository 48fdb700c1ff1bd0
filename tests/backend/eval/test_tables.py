"""Every table committed under results/ is recomputed from its rows and must be, byte for byte, what
its page publishes: the numbers and each rows file's sha256. A table edited by hand, or rows
changed after the table was published, fail here."""

from __future__ import annotations

import json
import shutil

import pytest

from backend.eval.__main__ import main
from backend.eval.results import ResultsError, ResultsFile
from backend.eval.table import read_table_spec, recompute_table, table_folders

from .conftest import REPO_ROOT

TABLES = table_folders(REPO_ROOT)
SMOLLM2 = REPO_ROOT / "results" / "smollm2-baseline"


def test_the_results_folder_holds_the_smollm2_baseline():
    assert SMOLLM2 in TABLES


@pytest.mark.parametrize("folder", TABLES, ids=[f.name for f in TABLES])
def test_a_committed_table_is_what_its_page_publishes(folder, capsys):
    assert main(["--table", str(folder)]) == 0
    printed = capsys.readouterr().out
    page = REPO_ROOT / read_table_spec(folder).published_in
    assert printed in page.read_text(encoding="utf-8"), (
        f"{page} does not print the table `python -m backend.eval --table {folder.relative_to(REPO_ROOT)}` "
        f"recomputes from its rows:\n{printed}")


def test_a_changed_row_changes_the_table_and_its_checksum(tmp_path):
    copy = tmp_path / SMOLLM2.name
    shutil.copytree(SMOLLM2, copy)
    rows_file = copy / "rag-cold" / "rows.jsonl"
    rows = [json.loads(line) for line in rows_file.read_text(encoding="utf-8").splitlines()]
    wrong = next(r for r in rows if not r["correct"])
    wrong.update(correct=True, verdict="correct")  # one more question right, as a hand edit would make it
    rows_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")

    published = recompute_table(SMOLLM2)
    changed = recompute_table(copy)
    page = (REPO_ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert changed not in page
    rag_published, rag_changed = (next(line for line in table.splitlines() if line.startswith("| rag (cold) |"))
                                  for table in (published, changed))
    assert "| 16.0% |" in rag_published and "| 18.0% |" in rag_changed  # 8 of 50 right, then 9
    assert "| 7 / 1 / 3 |" in rag_published and "| 7 / 2 / 3 |" in rag_changed  # the paired counts follow
    digest = next(line for line in published.splitlines() if line.startswith("- `rag-cold/rows.jsonl`"))
    assert digest not in changed


def test_a_hand_edited_table_is_not_the_recomputed_one():
    page = (REPO_ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    table = recompute_table(SMOLLM2)
    edited = page.replace("| none (cold) | 50 | 20.0% |", "| none (cold) | 50 | 22.0% |")
    assert edited != page
    assert table not in edited


def test_a_published_tables_rows_are_read_without_being_repaired(tmp_path):
    """A committed rows file whose last line is cut is refused, never truncated to fit (its checksum
    would no longer name the rows the page was computed from)."""
    whole = (SMOLLM2 / "none-cold" / "rows.jsonl").read_bytes()
    cut = tmp_path / "rows.jsonl"
    cut.write_bytes(whole[: len(whole) - 40])
    with pytest.raises(ResultsError, match="line 50: not a result row"):
        ResultsFile(cut).read(repair=False)
    assert cut.read_bytes() == whole[: len(whole) - 40]
    unterminated = tmp_path / "unterminated.jsonl"
    unterminated.write_bytes(whole.rstrip(b"\n"))
    assert len(ResultsFile(unterminated).read(repair=False)) == 50
    assert unterminated.read_bytes() == whole.rstrip(b"\n")


def test_a_table_naming_a_missing_rows_file_or_column_says_what_to_do(tmp_path, capsys):
    folder = tmp_path / "table"
    folder.mkdir()
    spec = {"published_in": "docs/results.md", "columns": ["N", "accuracy"],
            "evaluations": [{"label": "none", "rows": "none/rows.jsonl"}]}
    (folder / "table.json").write_text(json.dumps(spec), encoding="utf-8")
    assert main(["--table", str(folder)]) == 2
    assert "no such column 'accuracy'" in capsys.readouterr().err
    spec["columns"] = ["N", "judge accuracy"]
    (folder / "table.json").write_text(json.dumps(spec), encoding="utf-8")
    assert main(["--table", str(folder)]) == 2
    assert "commit the rows file the table was computed from beside it" in capsys.readouterr().err
