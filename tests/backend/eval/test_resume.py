"""Resuming an interrupted evaluation: finished rows are kept, the rest is asked again, and the
memories an unfinished question left behind are removed first."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace

import pytest

from backend.eval.results import ResultsFile
from backend.eval.spec import (REMOVED_SETTINGS_COMMIT, ROWS_FILE, EvalError, EvalSpec, check_or_write_manifest,
                               read_manifest)

from .conftest import DEV, SMOKE_QUESTIONS, TRAIN


def copy_folder(source, target):
    shutil.copytree(source, target)
    return target


def test_interrupted_stream_resumes_after_the_last_complete_row(smoke_results, run_eval, tmp_path):
    # The state a kill leaves: memories for all 3 questions, but rows for the first one and a half.
    finished_dir, finished = smoke_results["rag"]
    out_dir = copy_folder(finished_dir, tmp_path / "rag")
    rows_path = out_dir / ROWS_FILE
    first, second = finished.rows[0], finished.rows[1]
    rows_path.write_text(first.to_json() + "\n" + second.to_json()[:55], encoding="utf-8")

    outcome = run_eval(EvalSpec(data=DEV, method="rag", out_dir=out_dir, limit=SMOKE_QUESTIONS))

    rows = ResultsFile(rows_path).read()
    assert rows == outcome.rows and len(rows) == SMOKE_QUESTIONS
    assert rows[0] == first  # kept as written, not re-run
    assert [r.id for r in rows] == [r.id for r in finished.rows]
    assert {r.run_id for r in rows[1:]}.isdisjoint({r.run_id for r in finished.rows})  # asked again
    # The re-run of question 2 must not see its own interrupted attempt: only question 1's memory.
    assert set(rows[1].memory_ids) <= {first.memory_stored}
    assert rows[1].memories_used >= 1


def test_a_longer_limit_extends_the_stream_without_redoing_it(smoke_results, run_eval, tmp_path):
    finished_dir, finished = smoke_results["none"]
    out_dir = copy_folder(finished_dir, tmp_path / "none")
    outcome = run_eval(EvalSpec(data=DEV, method="none", out_dir=out_dir, limit=SMOKE_QUESTIONS + 1))
    assert outcome.rows[:SMOKE_QUESTIONS] == finished.rows
    assert len(outcome.rows) == SMOKE_QUESTIONS + 1 and outcome.rows[-1].index == SMOKE_QUESTIONS


def test_a_folder_refuses_a_different_evaluation(smoke_results, eval_config):
    out_dir, _ = smoke_results["none"]
    with pytest.raises(EvalError, match="holds another evaluation .*method: was 'none', now 'plan'"):
        check_or_write_manifest(EvalSpec(data=DEV, method="plan", out_dir=out_dir), eval_config)
    with pytest.raises(EvalError, match="seed: was 0, now 5"):
        check_or_write_manifest(EvalSpec(data=DEV, method="none", out_dir=out_dir, seed=5), eval_config)


def test_a_committed_result_folder_resumes_from_another_checkout(smoke_results, eval_config, tmp_path):
    """eval.json records a questions file of the repository relative to it; an older record with the
    absolute path of another checkout still counts as the same file; another file is still refused."""
    out_dir = copy_folder(smoke_results["none"][0], tmp_path / "none")
    manifest_path = out_dir / "eval.json"
    assert json.loads(manifest_path.read_text())["data"] == "data/hotpotqa/dev.jsonl"

    old = json.loads(manifest_path.read_text())
    old["data"] = "/some/other/checkout/data/hotpotqa/dev.jsonl"
    manifest_path.write_text(json.dumps(old), encoding="utf-8")
    check_or_write_manifest(EvalSpec(data=DEV, method="none", out_dir=out_dir), eval_config)
    assert json.loads(manifest_path.read_text())["data"] == "data/hotpotqa/dev.jsonl"

    with pytest.raises(EvalError, match="data: was 'data/hotpotqa/dev.jsonl', now 'data/hotpotqa/train.jsonl'"):
        check_or_write_manifest(EvalSpec(data=TRAIN, method="none", out_dir=out_dir), eval_config)


@pytest.mark.parametrize(("setting", "off", "other"), [("image_text_first", False, True)])
def test_a_folder_from_before_a_later_agent_setting_resumes_as_run_with_it_off(smoke_results, eval_config, tmp_path,
                                                                            setting, off, other):
    eval_config = replace(eval_config, agent=replace(eval_config.agent, **{setting: off}))
    out_dir = copy_folder(smoke_results["none"][0], tmp_path / "none")
    manifest_path = out_dir / "eval.json"
    old = json.loads(manifest_path.read_text())
    del old["agent"][setting]
    manifest_path.write_text(json.dumps(old), encoding="utf-8")
    check_or_write_manifest(EvalSpec(data=DEV, method="none", out_dir=out_dir), eval_config)
    manifest_path.write_text(json.dumps(old), encoding="utf-8")
    with pytest.raises(EvalError, match="holds another evaluation .*agent"):
        check_or_write_manifest(EvalSpec(data=DEV, method="none", out_dir=out_dir),
                                replace(eval_config, agent=replace(eval_config.agent, **{setting: other})))


def test_a_folder_from_before_agent_tools_resumes_with_the_tools_it_ran_with(eval_config, tmp_path):
    """Before agent.tools the tools were fixed, and search.calculator = true added the calculator."""
    spec = EvalSpec(data=DEV, method="none", out_dir=tmp_path / "none")
    manifest_path = spec.out_dir / "eval.json"
    old = check_or_write_manifest(spec, eval_config)
    assert old["agent"]["tools"] == ["search", "web_search", "visit", "image_search"]
    del old["agent"]["tools"]
    for calculator, tools in ((False, eval_config.agent.tools), (True, (*eval_config.agent.tools, "calculate"))):
        manifest_path.write_text(json.dumps({**old, "search": {**old["search"], "calculator": calculator}}), encoding="utf-8")
        check_or_write_manifest(spec, replace(eval_config, agent=replace(eval_config.agent, tools=tools)))
    manifest_path.write_text(json.dumps({**old, "search": {**old["search"], "calculator": True}}), encoding="utf-8")
    with pytest.raises(EvalError, match="holds another evaluation .*agent"):
        check_or_write_manifest(spec, eval_config)


@pytest.mark.parametrize(("setting", "off", "ran"), [("plan_candidates", 1, 4), ("strategies_by_type", False, True),
                                                 ("quote_check", "off", "nearest")])
def test_a_folder_naming_a_removed_variant_resumes_only_where_it_ran_off(eval_config, tmp_path, setting, off, ran):
    spec = EvalSpec(data=DEV, method="none", out_dir=tmp_path / "none")
    manifest_path = spec.out_dir / "eval.json"
    old = check_or_write_manifest(spec, eval_config)
    assert setting not in old["agent"]
    manifest_path.write_text(json.dumps({**old, "agent": {**old["agent"], setting: off}}), encoding="utf-8")
    check_or_write_manifest(spec, eval_config)
    manifest_path.write_text(json.dumps({**old, "agent": {**old["agent"], setting: ran}}), encoding="utf-8")
    with pytest.raises(EvalError, match=rf"ran agent\.{setting} = {re.escape(json.dumps(ran))}, a variant measured and "
                                        rf"removed .*check out commit {REMOVED_SETTINGS_COMMIT}"):
        check_or_write_manifest(spec, eval_config)
    assert read_manifest(spec.out_dir)["agent"][setting] == ran  # still read: reports and comparisons name it


def test_bad_options_are_refused_with_a_sentence(tmp_path):
    with pytest.raises(EvalError, match="--method 'best' is unknown; choose one of mia"):
        EvalSpec(data=DEV, method="best", out_dir=tmp_path)
    with pytest.raises(EvalError, match="--warm-limit needs --warm-from"):
        EvalSpec(data=DEV, method="mia", out_dir=tmp_path, warm_limit=3)


def test_a_second_pass_starts_from_a_copy_of_a_finished_evaluations_memory(smoke_results, eval_config_file, embedder, tmp_path):
    """--memory-from: the first pass's memories are copied in (the source is left as it was), shown to
    the second pass, kept on resume, and another method's memory is refused."""
    from backend.eval.__main__ import main
    from backend.eval.spec import MEMORY_FILE, ROWS_FILE as ROWS
    from memory_db import MemoryStore
    from .conftest import DEV

    source = smoke_results["mia"][0]
    source_bytes = (source / MEMORY_FILE).read_bytes()
    first_pass = MemoryStore(f"sqlite:///{source / MEMORY_FILE}", embedder=embedder)
    copied = {m.id for m in first_pass.list(namespace="eval-mia", limit=100)}
    first_pass.close()
    assert copied
    out = tmp_path / "second-pass"
    args = ["--data", str(DEV), "--method", "mia", "--limit", "1", "--memory-from", str(source), "--out", str(out),
            "--config", str(eval_config_file), "--no-progress"]
    assert main(args) == 0
    store = MemoryStore(f"sqlite:///{out / MEMORY_FILE}", embedder=embedder)
    kept = {m.id for m in store.list(namespace="eval-mia", limit=100)}
    store.close()
    assert copied <= kept  # none taken for an interrupted question's leftovers
    row = ResultsFile(out / ROWS).read()[0]
    assert set(row.memory_ids) & copied  # the second pass was shown the first pass's memory
    manifest = json.loads((out / "eval.json").read_text(encoding="utf-8"))
    assert manifest["memory_from"] and manifest["label"] == f"mia (memory of {source.name})"
    assert (source / MEMORY_FILE).read_bytes() == source_bytes
    from backend.eval.compare import compare
    report = compare([out], tmp_path / "compare").read_text(encoding="utf-8")
    assert f"warm-up the memory of `{source.name}`" in report  # the comparison names the memory it started from
    assert main(args[:5] + ["2"] + args[6:]) == 0  # resumed and extended: its own memory, not a new copy
    assert len(ResultsFile(out / ROWS).read()) == 2
    assert main(["--data", str(DEV), "--method", "none", "--limit", "1", "--memory-from", str(source),
                 "--out", str(tmp_path / "other"), "--config", str(eval_config_file), "--no-progress"]) == 2
    assert not (tmp_path / "other").exists()


def test_teach_and_retest_answers_every_taught_question_from_what_was_taught(eval_config_file, embedder, tmp_path):
    """--teach asks without ground truth and then gives it as a typed right answer, as a person does in
    the app; a second pass from that memory (--memory-from) answers each question with it. --skip
    takes the questions after the first ones."""
    from backend.eval.__main__ import main
    from backend.eval.datasets import load_questions
    from backend.eval.spec import MEMORY_FILE, ROWS_FILE as ROWS
    from memory_db import MemoryStore

    taught, retest = tmp_path / "taught", tmp_path / "retest"
    common = ["--data", str(DEV), "--method", "mia", "--skip", "3", "--limit", "2", "--config", str(eval_config_file),
              "--no-progress"]
    assert main(common + ["--teach", "--out", str(taught)]) == 0
    questions = load_questions(DEV, skip=3, limit=2)
    rows = ResultsFile(taught / ROWS).read()
    assert [r.id for r in rows] == [q.id for q in questions]
    assert all(r.judge_method == "taught: the Judge against the typed right answer" for r in rows)
    store = MemoryStore(f"sqlite:///{taught / MEMORY_FILE}", embedder=embedder)
    answers = {m.question: m.provenance.get("taught_answer") for m in store.list(namespace="eval-mia", limit=10)}
    store.close()
    assert answers == {q.question: q.answer for q in questions}
    manifest = json.loads((taught / "eval.json").read_text(encoding="utf-8"))
    assert (manifest["teach"], manifest["skip"], manifest["label"]) == (True, 3, "mia (taught)")

    assert main(common + ["--memory-from", str(taught), "--out", str(retest)]) == 0
    again = ResultsFile(retest / ROWS).read()
    assert [(r.answer, r.verdict) for r in again] == [(q.answer, "correct") for q in questions]


def _recorded_code(out_dir, **code) -> None:
    manifest_path = out_dir / "eval.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["code"] = {**manifest["code"], **code}
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")


def test_rows_written_by_other_code_resume_only_when_accepted_and_the_change_is_recorded(smoke_results, eval_config,
                                                                                        tmp_path):
    from backend.eval.report import code_line

    out_dir = copy_folder(smoke_results["none"][0], tmp_path / "none")
    check_or_write_manifest(EvalSpec(data=DEV, method="none", out_dir=out_dir), eval_config)  # same code: resumes
    assert "code_resumed" not in json.loads((out_dir / "eval.json").read_text())

    _recorded_code(out_dir, commit="0" * 40, dirty=None)
    with pytest.raises(EvalError, match="written by commit 00000000.*--accept-code-change"):
        check_or_write_manifest(EvalSpec(data=DEV, method="none", out_dir=out_dir), eval_config)
    manifest = check_or_write_manifest(EvalSpec(data=DEV, method="none", out_dir=out_dir, accept_code_change=True),
                                       eval_config)
    assert manifest["code"]["commit"] == "0" * 40
    assert [entry["rows_before"] for entry in manifest["code_resumed"]] == [SMOKE_QUESTIONS]
    assert json.loads((out_dir / "eval.json").read_text())["code_resumed"] == manifest["code_resumed"]
    assert f"from row {SMOKE_QUESTIONS + 1}: commit" in code_line(manifest)
    # Once recorded, the same code resumes without the option again.
    check_or_write_manifest(EvalSpec(data=DEV, method="none", out_dir=out_dir), eval_config)


def test_rows_written_with_other_prompts_are_never_resumed(smoke_results, eval_config, tmp_path):
    out_dir = copy_folder(smoke_results["none"][0], tmp_path / "none")
    _recorded_code(out_dir, prompts="f" * 16)
    with pytest.raises(EvalError, match="written with other prompts .*prompts ffffffffffffffff"):
        check_or_write_manifest(EvalSpec(data=DEV, method="none", out_dir=out_dir, accept_code_change=True),
                                eval_config)


def test_a_folder_from_before_the_code_was_recorded_resumes_and_records_the_code(smoke_results, eval_config,
                                                                                tmp_path):
    out_dir = copy_folder(smoke_results["none"][0], tmp_path / "none")
    manifest_path = out_dir / "eval.json"
    old = json.loads(manifest_path.read_text())
    del old["code"]
    manifest_path.write_text(json.dumps(old), encoding="utf-8")
    manifest = check_or_write_manifest(EvalSpec(data=DEV, method="none", out_dir=out_dir), eval_config)
    assert manifest["code"] is None and manifest["code_resumed"][0]["rows_before"] == SMOKE_QUESTIONS


def test_a_folder_reached_through_a_linked_data_folder_resumes(smoke_results, eval_config, tmp_path, monkeypatch):
    """A checkout whose .mia links to another checkout's records the questions file by its real path,
    and the next start in the same checkout counts it as the same file."""
    from backend.eval import spec as spec_module

    repo, elsewhere = tmp_path / "checkout", tmp_path / "other-checkout" / ".mia"
    elsewhere.mkdir(parents=True)
    repo.mkdir()
    (repo / ".mia").symlink_to(elsewhere)
    shutil.copy(DEV, elsewhere / "questions.jsonl")
    monkeypatch.setattr(spec_module, "REPO_ROOT", repo)
    out_dir = tmp_path / "none"
    out_dir.mkdir()
    spec = EvalSpec(data=repo / ".mia" / "questions.jsonl", method="none", out_dir=out_dir)

    check_or_write_manifest(spec, eval_config)
    assert json.loads((out_dir / "eval.json").read_text())["data"] == str(elsewhere / "questions.jsonl")
    check_or_write_manifest(spec, eval_config)  # the same evaluation: resumes
