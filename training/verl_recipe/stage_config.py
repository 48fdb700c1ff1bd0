"""Compose a stage's Hydra config as verl's launcher would, and check it before a cluster is booked.

`load_stage_config` runs verl's own `validate_config` plus our checks that the paper's settings
(8 rollouts, lr 1e-6, batch 128, GRPO without any KL term, 16k lengths for the Executor) and our
tool, agent loop and reward function are wired in and importable.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

CONFIG_DIR = Path(__file__).resolve().parent / "config"
REPO_ROOT = Path(__file__).resolve().parents[2]
STAGE_CONFIGS = {"executor": "mia_executor_grpo", "planner": "mia_planner_grpo"}


class VerlConfigError(ValueError):
    """A verl stage config is inconsistent; the message names the key and what to set."""


def load_stage_config(stage: str, overrides: list[str] | None = None) -> DictConfig:
    from hydra import compose, initialize_config_dir

    if stage not in STAGE_CONFIGS:
        raise VerlConfigError(f"stage must be one of {', '.join(STAGE_CONFIGS)}, got {stage!r}.")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        config = compose(config_name=STAGE_CONFIGS[stage], overrides=list(overrides or []))
    check_stage_config(stage, config)
    return config


def _require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise VerlConfigError(f"{key}: {message}.")


def check_stage_config(stage: str, config: DictConfig) -> None:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    _require(config.algorithm.adv_estimator == "grpo", "algorithm.adv_estimator", "must be grpo")
    _require(not config.algorithm.use_kl_in_reward, "algorithm.use_kl_in_reward", "must be false (no KL term)")
    _require(not actor.use_kl_loss, "actor_rollout_ref.actor.use_kl_loss", "must be false (no KL term)")
    _require(rollout.n >= 2, "actor_rollout_ref.rollout.n", "GRPO needs at least 2 rollouts per question")
    _require(rollout.name in ("vllm", "sglang"), "actor_rollout_ref.rollout.name", "must be vllm or sglang")
    _require(rollout.multi_turn.enable, "actor_rollout_ref.rollout.multi_turn.enable", "must be true")
    if stage == "executor":
        _require(config.data.max_prompt_length >= 16384 and config.data.max_response_length >= 16384,
                 "data.max_prompt_length/max_response_length", "the Executor needs 16k prompt and response lengths")
    for key in ("rollout.multi_turn.tool_config_path", "rollout.agent.agent_loop_config_path"):
        path = OmegaConf.select(config.actor_rollout_ref, key)
        _require(path is not None and (REPO_ROOT / path).is_file(), f"actor_rollout_ref.{key}",
                 f"{path!r} is not a file relative to the repository root")
    agent_loops = OmegaConf.load(REPO_ROOT / rollout.agent.agent_loop_config_path)
    names = {entry.name: entry._target_ for entry in agent_loops}
    _require(rollout.agent.default_agent_loop in names, "actor_rollout_ref.rollout.agent.default_agent_loop",
             f"must be one of {', '.join(names)}")
    for target in names.values():
        module, _, attribute = target.rpartition(".")
        _require(importlib.util.find_spec(module) is not None, "agent_loops.yaml", f"cannot import {module}")
    reward = config.reward.custom_reward_function
    _require(reward.path is not None and (REPO_ROOT / reward.path).is_file(),
             "reward.custom_reward_function.path", "must be a file relative to the repository root")
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
