"""Both GRPO stages end to end on the tiny model, the alternation, and the command line."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from backend.llm.embedded import EmbeddedChatModel
from training.__main__ import main
from training.grpo_config import TrainingConfigError, load_settings, settings_from_mapping
from training.trainer import StageTrainer, score_episode

FAST = {
    "model_dir": "tiny-random", "num_questions": 2, "steps": 1, "questions_per_step": 1, "rollouts_per_question": 2,
    "agent": {"max_turns": 1, "reflections": 1},
    "roles": {"executor": {"max_new_tokens": 12}, "planner": {"max_new_tokens": 12}},
    "learning_rate": 1e-3, "lora": {"r": 4, "alpha": 8, "dropout": 0.0},
}


def _settings(tmp_path, **more):
    return settings_from_mapping({**FAST, "output_dir": str(tmp_path / "out"), **more})


@pytest.mark.parametrize("stage", ["executor", "planner"])
def test_one_grpo_step_then_a_checkpoint_the_app_loads(stage, tmp_path, wiki_tools, tiny_model_dir):
    trainer = StageTrainer(stage, _settings(tmp_path), tools=wiki_tools)
    if stage == "executor":
        assert all(r.plan_steps for r in trainer.records)  # plans written by the frozen Planner
    logs = trainer.train(log_path=tmp_path / "log.jsonl")
    (line,) = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert line["stage"] == stage and line["step"] == 1 and 0.0 <= line["mean_reward"] <= 1.04
    assert logs[0].mean_reward == line["mean_reward"]
    episode, samples = trainer.episode(trainer.records[0], record_turns=True)
    assert samples and all(s.completion_ids for s in samples)  # the policy's own decisions were recorded
    reward = score_episode(stage, episode, wiki_tools)
    assert set(reward.parts) == ({"acc", "tool", "format"} if stage == "executor" else {"acc_final", "acc_first", "format", "decision"})
    seen = []
    rewards = trainer.evaluate(trainer.records, rollouts=2, on_rollout=lambda i, j, r, s: seen.append((i, j, r)))
    assert [(i, j) for i, j, _ in seen] == [(i, j) for i in (1, 2) for j in (1, 2)]
    assert [r for _, _, r in seen] == rewards and all(set(r.parts) == set(reward.parts) for r in rewards)
    checkpoint = trainer.save(tmp_path / "ckpt")
    model = EmbeddedChatModel(checkpoint)
    assert model.generate([{"role": "user", "content": "hi"}], max_new_tokens=3).completion_tokens >= 1


def test_settings_errors_name_the_key(tmp_path):
    with pytest.raises(TrainingConfigError, match="rollouts_per_question: must be at least 2"):
        _settings(tmp_path, rollouts_per_question=1)
    with pytest.raises(TrainingConfigError, match="learnig_rate: unknown setting"):
        _settings(tmp_path, learnig_rate=1.0)
    with pytest.raises(TrainingConfigError, match="steps: expected int"):
        _settings(tmp_path, steps="many")
    assert _settings(tmp_path, lora=None).lora is None  # full fine-tuning


def test_cli_reports_bad_config_as_a_sentence(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("judge: oracle\n", encoding="utf-8")
    assert main(["executor", "--config", str(bad)]) == 2
    assert "judge: must be 'exact' or 'model'" in capsys.readouterr().err
    assert main(["planner", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.verl
def test_cli_dataset_and_verl_check(tmp_path, capsys):
    out = tmp_path / "stage2.parquet"
    assert main(["dataset", "--stage", "planner", "--hotpotqa", "data/hotpotqa/dev.jsonl", "--limit", "3", "--verl", "--out", str(out)]) == 0
    assert len(pd.read_parquet(out)) == 3
    assert main(["verl-check", "--stage", "executor"]) == 0
    assert "executor: ok (n=8, lr=1e-06, batch=128" in capsys.readouterr().out


def test_alternation_records_each_round(tmp_path, capsys):
    executor = tmp_path / "executor.yaml"
    planner = tmp_path / "planner.yaml"
    executor.write_text(yaml.safe_dump({**FAST, "num_questions": 1, "output_dir": str(tmp_path / "ex")}), encoding="utf-8")
    planner.write_text(yaml.safe_dump({**FAST, "num_questions": 1, "output_dir": str(tmp_path / "pl")}), encoding="utf-8")
    assert main(["alternate", "--rounds", "1", "--executor-config", str(executor), "--planner-config", str(planner),
                 "--output-dir", str(tmp_path / "alt")]) == 0
    (round_line,) = [json.loads(x) for x in (tmp_path / "alt" / "rounds.jsonl").read_text().splitlines()]
    assert round_line["round"] == 1
    assert round_line["executor_checkpoint"].endswith("executor/executor-final")
    assert round_line["planner_checkpoint"].endswith("planner/planner-final")
    assert (tmp_path / "alt" / "round-1" / "stage1.parquet").is_file()
    assert load_settings(executor).num_questions == 1


def test_guided_executor_turns_record_the_sampled_action_choice(tmp_path, wiki_tools):
    trainer = StageTrainer("executor", _settings(tmp_path, agent={**FAST["agent"], "guided_actions": "on"}), tools=wiki_tools)
    assert trainer.episode_settings.guided
    episode, samples = trainer.episode(trainer.records[0], record_turns=True)
    assert any(step.tool == "search" for step in episode.steps)  # guided turns always reach a tool call
    option_lengths = {len(s.completion_ids) for s in samples}
    assert samples and min(option_lengths) <= 3  # the action choice is recorded as its option's few tokens
    with pytest.raises(TrainingConfigError, match='agent.guided_actions: must be "auto", "on" or "off"'):
        _settings(tmp_path, agent={"guided_actions": "yes"})
