"""An evaluation whose Planner answers with a test-time-learning version (--planner-version): the
version's LoRA really answers (its plans differ from the base Planner's), eval.json names it with the
sha256 of its weights, a folder resumes only with the same version, and a folder without adapter/ is
refused with a sentence saying what to pass."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace

import pytest

from backend.eval.__main__ import main
from backend.eval.spec import (ROWS_FILE, EvalError, EvalSpec, check_or_write_manifest, logged_events,
                               read_planner_version, role_identity)
from backend.events import PlanReady
from backend.eval.results import ResultsFile
from tests.learning_folder import write_adapter
from training.ttrl.version_folder import ADAPTER, ADAPTER_WEIGHTS

from .conftest import DEV

QUESTIONS = 1


@pytest.fixture(scope="module")
def versions(tiny_model_dir, tmp_path_factory):
    """Two version folders of the tiny model as the learner leaves them (versions/v0003/adapter/),
    with different random LoRAs."""
    root = tmp_path_factory.mktemp("ttrl") / "versions"
    for number in (3, 4):
        write_adapter(root / f"v{number:04d}" / ADAPTER, tiny_model_dir, seed=number)
    return root / "v0003", root / "v0004"


@pytest.fixture(scope="module")
def evaluated(versions, eval_config_file, tmp_path_factory):
    """The first dev question (mia, cold memory) on the base Planner and on v0003 through the
    command line, as benchmarks/ttrl_bench.py runs them: the Planner writes every plan. Returns the
    two folders."""
    root = tmp_path_factory.mktemp("eval-versions")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MIA_AGENT_SPARSE_MEMORY_PLANNER", "planner")
        folders = {}
        for name, extra in (("base", []), ("v0003", ["--planner-version", str(versions[0])])):
            folders[name] = root / name
            assert main(["--data", str(DEV), "--method", "mia", "--limit", str(QUESTIONS), "--out", str(folders[name]),
                         "--config", str(eval_config_file), "--no-progress", *extra]) == 0
    return folders


def plans(folder) -> list[PlanReady]:
    return [event for row in ResultsFile(folder / ROWS_FILE).read()
            for event in logged_events(folder, "eval-mia", row.run_id) if isinstance(event, PlanReady)]


def test_the_version_answers_in_the_planners_place(evaluated):
    base, version = plans(evaluated["base"]), plans(evaluated["v0003"])
    assert len(base) >= QUESTIONS and len(version) >= QUESTIONS
    assert all(not plan.planner_model.endswith("+v0003") for plan in base)
    assert all(plan.planner_model.endswith("+v0003") for plan in version)  # the Planner, not the Manager, planned
    assert [plan.text for plan in base] != [plan.text for plan in version]


def test_eval_json_names_the_version_and_the_sha256_of_its_weights(evaluated, versions, eval_config):
    weights = next(versions[0] / ADAPTER / name for name in ADAPTER_WEIGHTS if (versions[0] / ADAPTER / name).is_file())
    sha256 = hashlib.sha256(weights.read_bytes()).hexdigest()
    base = json.loads((evaluated["base"] / "eval.json").read_text(encoding="utf-8"))
    version = json.loads((evaluated["v0003"] / "eval.json").read_text(encoding="utf-8"))
    assert base["models"] == role_identity(eval_config)  # without the option: as before it existed
    assert version["models"] == {**base["models"], "planner": base["models"]["planner"] + f"+version:v0003@{sha256}"}
    assert version["label"] == "mia (cold), Planner v0003" and base["label"] == "mia (cold)"


def test_a_folder_resumes_only_with_its_own_version(evaluated, versions, eval_config, tmp_path):
    config = replace(eval_config, agent=replace(eval_config.agent, sparse_memory_planner="planner"))  # as they ran
    v0003, v0004 = (read_planner_version(folder) for folder in versions)
    version_dir, base_dir = (shutil.copytree(evaluated[name], tmp_path / name) for name in ("v0003", "base"))
    check_or_write_manifest(EvalSpec(data=DEV, method="mia", out_dir=version_dir, planner_version=v0003), config)
    check_or_write_manifest(EvalSpec(data=DEV, method="mia", out_dir=base_dir), config)
    for folder, other in ((version_dir, v0004), (version_dir, None), (base_dir, v0003)):
        with pytest.raises(EvalError, match=r"holds another evaluation \(models: was .*"
                                            r"Use a new --out folder, or repeat the original options"):
            check_or_write_manifest(EvalSpec(data=DEV, method="mia", out_dir=folder, planner_version=other),
                                    config)
    # The same weights in another folder of the same name are the same version.
    moved = shutil.copytree(versions[0], tmp_path / "elsewhere" / "v0003")
    check_or_write_manifest(EvalSpec(data=DEV, method="mia", out_dir=version_dir,
                                     planner_version=read_planner_version(moved)), config)


def test_a_folder_without_an_adapter_is_refused_before_any_model_loads(versions, eval_config_file, tmp_path, capsys):
    base_version = tmp_path / "versions" / "v0000"
    base_version.mkdir(parents=True)
    out = tmp_path / "out"
    assert main(["--data", str(DEV), "--limit", "1", "--out", str(out), "--config", str(eval_config_file),
                 "--planner-version", str(base_version)]) == 2
    error = capsys.readouterr().err
    assert f"--planner-version {base_version} has no adapter/ folder" in error
    assert "leave out --planner-version to evaluate it" in error
    assert not out.exists()

    with pytest.raises(EvalError, match=f"is the LoRA adapter itself; pass the version folder that holds it: "
                                        f"{versions[0]}"):
        read_planner_version(versions[0] / ADAPTER)
    incomplete = shutil.copytree(versions[0], tmp_path / "versions" / "v0005")
    for name in ADAPTER_WEIGHTS:
        (incomplete / ADAPTER / name).unlink(missing_ok=True)
    with pytest.raises(EvalError, match="is not a complete LoRA adapter .*pass another version folder"):
        read_planner_version(incomplete)


def test_an_adapter_setting_beside_the_option_is_refused(versions, eval_config, tmp_path):
    planner = replace(eval_config.role("planner"), adapter_dir=str(versions[1] / ADAPTER))
    config = replace(eval_config, roles={**eval_config.roles, "planner": planner})
    with pytest.raises(EvalError, match=r"roles.planner.adapter_dir \(MIA_PLANNER_ADAPTER_DIR\) and --planner-version"):
        check_or_write_manifest(EvalSpec(data=DEV, method="mia", out_dir=tmp_path / "out",
                                         planner_version=read_planner_version(versions[0])), config)
    assert not (tmp_path / "out").exists()


def test_the_option_goes_with_data(versions, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--summarize", str(tmp_path), "--planner-version", str(versions[0])])
    assert "--planner-version go with --data" in capsys.readouterr().err


def test_the_version_folder_layout_is_the_learners():
    from backend.eval.spec import VERSION_ADAPTER, VERSION_WEIGHTS

    assert (VERSION_ADAPTER, VERSION_WEIGHTS) == (ADAPTER, ADAPTER_WEIGHTS)
