"""The training benchmark's command line and report (fast: nothing is trained here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from training.grpo_config import load_settings

REPO = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("training_bench", REPO / "benchmarks" / "training_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_learning_defaults_to_the_planner_stage_and_keeps_the_executor_option():
    bench = _bench()
    assert bench.parse_args(["--only", "learning"]).stage == "planner"
    args = bench.parse_args(["--only", "learning", "--stage", "executor", "--max-new-tokens", "96"])
    assert (args.stage, args.max_new_tokens) == ("executor", 96)
    assert bench.parse_args([]).max_new_tokens is None  # the config's value


@pytest.mark.parametrize("argv", [
    ["--stage", "judge"],
    ["--learning-steps", "0"],
    ["--eval-rollouts", "-1"],
    ["--learning-questions", "x"],
    ["--max-new-tokens", "0"],
    ["--smollm2-steps", "-2"],
])
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        _bench().parse_args(argv)
    assert exited.value.code == 2
    assert "error" in capsys.readouterr().err


def test_each_learning_stage_has_a_valid_smollm2_config():
    bench = _bench()
    assert set(bench.LEARNING_CONFIGS) == {"planner", "executor"}
    for stage, config in bench.LEARNING_CONFIGS.items():
        settings = load_settings(bench.CONFIGS / config)
        assert settings.model_dir == "smollm2" and stage in config
    # 48-token Executor turns cut the tool call short, so the Executor stage had no signal.
    assert load_settings(bench.CONFIGS / "executor_smollm2_cpu.yaml").executor_max_new_tokens >= 96


def test_learning_table_reports_before_after_and_the_reward_parts():
    table = _bench().learning_table({
        "stage": "planner", "questions": 4, "eval_rollouts": 4, "steps": 6, "rollouts_per_step": 4,
        "reward_before": 0.25, "reward_after": 0.3125, "parts_before": {"acc_final": 0.25, "format": 1.0},
        "parts_after": {"acc_final": 0.375, "format": 0.5}, "train_s": 612.4, "step_rewards": [0.1, 0.4],
        "peak_rss_mb": 2600.2,
    })
    header, rule, row = table.splitlines()
    assert header.count("|") == rule.count("|") == row.count("|")
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:7] == ["planner", "SmolLM2-135M Planner (LoRA), frozen SmolLM2 Executor", "4", "4", "6 (4)",
                         "0.250", "0.312"]
    assert cells[7:] == ["acc_final 0.25, format 1.00", "acc_final 0.38, format 0.50", "612", "[0.1, 0.4]", "2600"]
