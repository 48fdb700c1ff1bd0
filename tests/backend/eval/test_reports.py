"""Summaries and comparisons: every number is recomputed here from the rows files."""

from __future__ import annotations

import hashlib
import json
import os
import shutil

from backend.eval.__main__ import main
from backend.eval.compare import COMPARE_MD, CURVE_PNG, compare
from backend.eval.report import SUMMARY_JSON, SUMMARY_MD, write_summary
from backend.eval.results import ResultsFile
from backend.eval.significance import questions_for_power
from backend.eval.spec import ROWS_FILE


def test_summary_is_traceable_to_the_rows(smoke_results):
    out_dir, _ = smoke_results["mia"]
    document = write_summary(out_dir)
    rows = ResultsFile(out_dir / ROWS_FILE).read()
    summary = json.loads((out_dir / SUMMARY_JSON).read_text(encoding="utf-8"))["summary"]
    assert summary == json.loads(json.dumps(document["summary"]))
    assert summary["questions"] == len(rows)
    assert summary["accuracy"] == round(sum(r.correct for r in rows) / len(rows), 4)
    assert summary["f1"] == round(sum(r.f1 for r in rows) / len(rows), 4)
    assert summary["time_split"]["llm_s"] == round(sum(r.llm_seconds for r in rows), 3)
    assert summary["per_question"]["llm_calls"] == round(sum(r.llm_calls for r in rows) / len(rows), 2)
    assert document["rows_sha256"] == hashlib.sha256((out_dir / ROWS_FILE).read_bytes()).hexdigest()
    markdown = (out_dir / SUMMARY_MD).read_text(encoding="utf-8")
    assert "| mia (cold) | 3 |" in markdown and "Framework overhead" in markdown
    for row in rows:
        assert f"| {row.index} | {row.id} |" in markdown


def test_a_row_from_before_first_answer_times_gets_it_from_its_run_log(smoke_results, tmp_path):
    import dataclasses
    import shutil

    from backend.eval.report import with_first_answer

    folder = shutil.copytree(smoke_results["mia"][0], tmp_path / "old")
    rows = ResultsFile(folder / ROWS_FILE).read()
    (folder / ROWS_FILE).write_text("".join(dataclasses.replace(r, first_answer_seconds=None).to_json() + "\n"
                                            for r in rows), encoding="utf-8")
    old_rows = ResultsFile(folder / ROWS_FILE).read()
    assert [with_first_answer(r, folder, "eval-mia").first_answer_seconds for r in old_rows] == [
        r.first_answer_seconds for r in rows]
    times = sorted(r.first_answer_seconds for r in rows)
    assert write_summary(folder)["summary"]["first_answer_p50_s"] == round(times[1], 3)  # 3 rows: the middle one
    lost_log = dataclasses.replace(old_rows[0], run_id="no-such-run")
    assert with_first_answer(lost_log, folder, "eval-mia").first_answer_seconds is None


def test_compare_two_folders_writes_a_table_and_a_plot(smoke_results, tmp_path):
    folders = [smoke_results["mia"][0], smoke_results["none"][0]]
    path = compare(folders, tmp_path / "cmp")
    assert path == tmp_path / "cmp" / COMPARE_MD
    text = path.read_text(encoding="utf-8")
    for folder, label in zip(folders, ("mia (cold)", "none (cold)")):
        rows = ResultsFile(folder / ROWS_FILE).read()
        accuracy = 100 * sum(r.correct for r in rows) / len(rows)
        assert f"| {label} | 3 | {accuracy:.1f}% |" in text
        link = os.path.relpath(folder / ROWS_FILE, tmp_path / "cmp")
        assert f"[`{link}`]({link})" in text and (tmp_path / "cmp" / link).is_file()
    assert f"![accuracy over the stream]({CURVE_PNG})" in text
    assert (tmp_path / "cmp" / CURVE_PNG).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The second evaluation paired against the first, and every miss of each given one cause.
    mia_rows, none_rows = (ResultsFile(f / ROWS_FILE).read() for f in folders)
    only_none = sum(n.correct and not m.correct for m, n in zip(mia_rows, none_rows))
    only_mia = sum(m.correct and not n.correct for m, n in zip(mia_rows, none_rows))
    assert "Paired against mia (cold)" in text
    paired = next(line for line in text.splitlines() if line.startswith("| none (cold) | 3 |") and "pts" in line)
    assert paired.split(" | ")[3:5] == [str(only_none), str(only_mia)]
    needed = questions_for_power(only_none, only_mia, 3)
    assert paired.rstrip(" |").split(" | ")[-1] == ("none" if needed is None else f"{needed:,}")
    loss_lines = text.split("Where the misses are lost")[1].splitlines()[4:6]
    assert [line.split("|")[1].strip() for line in loss_lines] == ["mia (cold)", "none (cold)"]
    for line, rows in zip(loss_lines, (mia_rows, none_rows)):
        cells = line.strip("|").split("|")
        misses = sum(not r.correct for r in rows)
        assert int(cells[1]) == misses and sum(int(c) for c in cells[2:-2]) == misses


def test_command_line_warm_up_then_stream(eval_config_file, tmp_path, capsys):
    from .conftest import DEV, TRAIN

    out_dir = tmp_path / "cli-rag"
    code = main([
        "--data", str(DEV), "--method", "rag", "--limit", "1", "--warm-from", str(TRAIN), "--warm-limit", "2",
        "--out", str(out_dir), "--config", str(eval_config_file), "--no-progress",
    ])
    assert code == 0
    assert "| rag (warm: 2 of train) | 1 |" in capsys.readouterr().out
    warm_rows = ResultsFile(out_dir / "warm.jsonl").read()
    train_ids = [json.loads(line)["id"] for line in TRAIN.read_text(encoding="utf-8").splitlines()[:2]]
    assert [r.id for r in warm_rows] == train_ids
    (row,) = ResultsFile(out_dir / ROWS_FILE).read()
    assert row.memories_used >= 1  # the first dev question already sees what the warm-up stored
    assert set(row.memory_ids) <= {r.memory_stored for r in warm_rows}
    summary = json.loads((out_dir / SUMMARY_JSON).read_text(encoding="utf-8"))
    assert summary["warm_up"]["questions"] == 2 and summary["summary"]["questions"] == 1


def test_command_line_errors_are_sentences(tmp_path, capsys, smoke_results):
    assert main(["--data", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "x")]) == 2
    assert "no such question file" in capsys.readouterr().err
    assert main(["--summarize", str(tmp_path)]) == 2
    assert "is not an evaluation folder" in capsys.readouterr().err
    assert main(["--summarize", str(smoke_results["plan"][0])]) == 0
    assert "| plan (cold) | 3 |" in capsys.readouterr().out


def test_compare_can_cut_every_stream_to_the_same_length(smoke_results, tmp_path, capsys):
    folders = [str(smoke_results[m][0]) for m in ("rag", "trace")]
    assert main(["--compare", *folders, "--limit", "2", "--out", str(tmp_path)]) == 0
    text = (tmp_path / COMPARE_MD).read_text(encoding="utf-8")
    assert "first 2 questions" in text
    for method in ("rag", "trace"):
        rows = ResultsFile(smoke_results[method][0] / ROWS_FILE).read()[:2]
        assert f"| {method} (cold) | 2 | {100 * sum(r.correct for r in rows) / 2:.1f}% |" in text


def test_compare_names_runs_of_one_method_apart_by_the_setting_that_differs(smoke_results, tmp_path):
    source = smoke_results["mia"][0]
    old, stricter, plans, again = (tmp_path / name for name in ("old", "stricter", "plans", "again"))
    for folder in (old, stricter, plans, again):
        shutil.copytree(source, folder)
    edit_manifest(old, lambda m: m["agent"].pop("taught_min_similarity"))  # written before the setting
    edit_manifest(stricter, lambda m: m["agent"].update(taught_min_similarity=0.9))
    edit_manifest(plans, lambda m: m["agent"].update(plan_candidates=4))  # a variant since removed
    text = compare([old, stricter, plans, again], tmp_path / "cmp").read_text(encoding="utf-8")
    table = text.split("Paired against")[0]
    assert "| mia (cold) [agent.taught_min_similarity = 0.9] | 3 |" in table
    assert "| mia (cold) [agent.plan_candidates = 4] | 3 |" in table
    # The reference and the same evaluation again read alike, so each is named by its folder.
    assert "| mia (cold) (old) | 3 |" in table and "| mia (cold) (again) | 3 |" in table
    assert "Paired against mia (cold) (old)" in text


def edit_manifest(folder, change) -> None:
    path = folder / "eval.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    change(manifest)
    path.write_text(json.dumps(manifest), encoding="utf-8")
