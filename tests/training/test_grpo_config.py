"""The trainer's YAML shares mia.toml's schema for its agent, role and reward settings."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from backend.config import ConfigError, ExecutorRewardConfig, RewardConfig, load_config
from backend.llm.embedded import EMBEDDED_TRAITS
from training.grpo_config import MOVED_KEYS, TrainingConfigError, load_settings, settings_from_mapping

CONFIGS = Path(__file__).resolve().parents[2] / "training" / "configs"


def write_yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_agent_and_roles_sections_set_what_the_trainer_reads(tmp_path):
    path = write_yaml(tmp_path, (
        "steps: 3\n"
        "agent:\n  max_turns: 5\n  reflections: 0\n  guided_actions: on\n"  # YAML 1.2: `on` is the text "on"
        "roles:\n  planner:\n    max_new_tokens: 40\n  executor:\n    max_new_tokens: 72\n"
        "rewards:\n  executor:\n    acc_weight: 0.5\n    format_weight: 0.3\n  planner:\n    decision_weight: 0.15\n"
    ))
    settings = load_settings(path)
    assert (settings.steps, settings.max_turns, settings.reflections, settings.guided_actions) == (3, 5, 0, True)
    assert (settings.planner_max_new_tokens, settings.executor_max_new_tokens) == (40, 72)
    assert settings.agent.guided_actions == "on" and settings.roles["executor"].max_new_tokens == 72
    assert settings.rewards.executor == ExecutorRewardConfig(acc_weight=0.5, format_weight=0.3)
    assert settings.rewards.planner.decision_weight == 0.15


def test_the_plan_shape_is_the_apps_agent_plan_shape(tmp_path):
    assert settings_from_mapping({}).plan_shape == "subquestions"  # the app's default
    settings = load_settings(write_yaml(tmp_path, "agent:\n  plan_shape: steps\n"))
    assert settings.plan_shape == settings.agent.plan_shape == "steps"


def test_defaults_and_automatic_values_resolve_as_the_app_does():
    settings = settings_from_mapping({})
    # without the sections: the trainer's own defaults (short rollouts, free-form turns, the paper's rewards)
    assert (settings.max_turns, settings.reflections, settings.guided_actions) == (2, 1, False)
    assert (settings.planner_max_new_tokens, settings.executor_max_new_tokens) == (64, 64)
    assert settings.rewards == RewardConfig()
    auto = settings_from_mapping({"agent": {"max_turns": 0, "guided_actions": "auto"}})
    # 0 and "auto" mean what the Executor's model declares; the trainer's models are embedded
    assert auto.max_turns == EMBEDDED_TRAITS.executor_turns == 8
    assert auto.guided_actions is True
    assert settings_from_mapping({"agent": {"guided_actions": "off"}}).guided_actions is False


@pytest.mark.parametrize("key", sorted(MOVED_KEYS))
def test_an_old_flat_key_names_its_new_key(tmp_path, key):
    value = True if key == "guided_actions" else 2
    path = write_yaml(tmp_path, yaml.safe_dump({"steps": 1, key: value}))
    with pytest.raises(TrainingConfigError) as info:
        load_settings(path)
    message = str(info.value)
    assert f"{key} moved to {MOVED_KEYS[key]}" in message and str(path) in message
    if key == "guided_actions":
        assert "{guided_actions: 'on'}" in message  # true is "on"


@pytest.mark.parametrize(
    ("toml", "mapping"),
    [
        ("[agent]\nmax_turns = -1\n", {"agent": {"max_turns": -1}}),
        ('[agent]\nmax_turns = "many"\n', {"agent": {"max_turns": "many"}}),
        ('[agent]\nguided_actions = "sometimes"\n', {"agent": {"guided_actions": "sometimes"}}),
        ("[agent]\nguided_actions = true\n", {"agent": {"guided_actions": True}}),
        ("[agent]\nreflections = -2\n", {"agent": {"reflections": -2}}),
        ('[agent]\nplan_shape = "hops"\n', {"agent": {"plan_shape": "hops"}}),
        ("[agent]\nturbo = true\n", {"agent": {"turbo": True}}),
        ("[roles.executor]\nmax_new_tokens = 4\n", {"roles": {"executor": {"max_new_tokens": 4}}}),
        ("[roles.planner]\nmax_new_tokens = 1.5\n", {"roles": {"planner": {"max_new_tokens": 1.5}}}),
        ("[roles.critic]\nmax_new_tokens = 9\n", {"roles": {"critic": {"max_new_tokens": 9}}}),
        ("[rewards.executor]\nacc_weight = -1\n", {"rewards": {"executor": {"acc_weight": -1}}}),
        ("[rewards.planner]\nspeed_weight = 1\n", {"rewards": {"planner": {"speed_weight": 1}}}),
    ],
)
def test_an_invalid_shared_value_is_the_same_error_as_in_mia_toml(tmp_path, toml, mapping):
    (tmp_path / "mia.toml").write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as app_error:
        load_config(tmp_path / "mia.toml", environ={})
    with pytest.raises(TrainingConfigError) as training_error:
        settings_from_mapping(mapping, where="run.yaml")
    assert str(training_error.value) == f"run.yaml: {app_error.value}"


@pytest.mark.parametrize(
    ("mapping", "key"),
    [
        ({"agent": {"memory_k": 3}}, "agent.memory_k"),
        ({"agent": {"max_turns": 2, "max_seconds": 100}}, "agent.max_seconds"),
        ({"roles": {"executor": {"backend": "openai", "base_url": "http://x/v1", "model": "m"}}}, "roles.executor.backend"),
        ({"roles": {"judge": {"max_new_tokens": 64}}}, "roles.judge.max_new_tokens"),
        ({"roles": {"manager": {}}}, "roles.manager"),
    ],
)
def test_a_shared_setting_the_trainer_would_ignore_is_refused(mapping, key):
    with pytest.raises(TrainingConfigError, match=rf"{key}: the trainer does not read this setting"):
        settings_from_mapping(mapping)


def test_the_committed_configs_keep_their_values():
    expected = {  # max_turns, reflections, guided_actions, executor tokens, planner tokens
        "executor_tiny_cpu.yaml": (2, 1, False, 32, 32),
        "planner_tiny_cpu.yaml": (2, 1, False, 32, 32),
        "executor_smollm2_cpu.yaml": (1, 1, True, 96, 48),
        "planner_smollm2_cpu.yaml": (1, 1, False, 48, 48),
    }
    grpo = [p for p in CONFIGS.glob("*.yaml") if not p.name.startswith("reader_")]  # reader_*: training/sft_config.py
    assert {p.name for p in grpo} == set(expected)
    for name, values in expected.items():
        s = load_settings(CONFIGS / name)
        assert (s.max_turns, s.reflections, s.guided_actions, s.executor_max_new_tokens, s.planner_max_new_tokens) == values
        assert s.rewards == RewardConfig()
