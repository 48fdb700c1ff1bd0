"""Our agent loops for verl: the app's own episode (backend.episode) with the policy on verl's server.

`mia_executor` (stage 1): the policy is the Executor and follows the dataset's plan with the row's
tools (`extra_info.tools`: the app's agent.tools when the dataset was written; rows without it, the
default list), built by backend/tools/registry.py as the app builds them but without web access, in
the app's ReAct protocol and prompts; tool responses come back as user turns (mask 0), the policy's
tokens have mask 1. The reward is the Executor reward of training.rewards,
read off the episode's steps.

`mia_planner` (stage 2): the policy is the Planner; the frozen Executor (an OpenAI-compatible
server, e.g. the stage-1 checkpoint under `vllm serve`, set by MIA_EXECUTOR_BASE_URL /
MIA_EXECUTOR_MODEL) runs its plan. The trajectory trained on is the blueprint (the app's planner
prompt with its ``1. Search for`` prefill); the reflection (a choice) and the supplementary plan are
sampled from the same policy and shape the reward, but are separate prompts and so not on the one
token sequence verl takes per rollout. The reward is training.rewards' planner reward.

Both follow the row's plan shape (`extra_info.plan_shape`, written by `python -m training dataset
--plan-shape`; rows without it are "steps"), as the app follows `agent.plan_shape`. On "subquestions"
the Executor researches the row's sub-questions hop by hop, and its trajectory is its reading of the
first hop (the later hops' readings are separate prompts); the Planner's trajectory is its
decomposition, prompted after the row's worked examples as the app prompts it, and reflection is the
app's hop check (a hop no retrieved sentence states is redone), not a sampled choice.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from backend.config import DEFAULT_TOOLS
from backend.episode import EpisodeSettings
from backend.tools.base import Tool
from backend.tools.registry import build_tools, tool_classes
from training.datasets import PLAN_SHAPES
from training.episode import Grader, run_episode
from training.verl_recipe.policy_model import VerlPolicyModel


def _tools(loop: AgentLoopBase, info: dict) -> dict[str, Tool]:
    """The row's tools, as a question without an image is offered them (a numpy array when read from parquet)."""
    index_dir = loop.config.get("mia", {}).get("index_cache_dir") or os.environ.get("MIA_INDEX_CACHE_DIR", ".mia/index")
    names = info.get("tools")
    return _built_tools(str(index_dir), tuple(str(name) for name in (DEFAULT_TOOLS if names is None else names)))


@functools.cache
def _built_tools(index_cache_dir: str, names: Sequence[str]) -> dict[str, Tool]:
    """Built once per process and shared by every trajectory (the wiki index is loaded once)."""
    offered = [cls.name for cls in tool_classes(names, key="extra_info.tools")]
    return build_tools(offered, cache_dir=Path(index_cache_dir), web_enabled=False, progress=False,
                       key="extra_info.tools")


def _plan_shape(info: dict) -> str:
    """The row's plan shape; a row written before rows carried it holds a plan of steps."""
    shape = str(info.get("plan_shape") or "steps")
    if shape not in PLAN_SHAPES:
        raise ValueError(f'extra_info.plan_shape must be "steps" or "subquestions", got {shape!r}; rebuild the dataset.')
    return shape


def _policy(loop: AgentLoopBase, sampling_params: dict[str, Any]) -> VerlPolicyModel:
    rollout = loop.config.actor_rollout_ref.rollout
    return VerlPolicyModel(loop, sampling_params, uuid4().hex, context_tokens=rollout.prompt_length + rollout.response_length)


@register("mia_executor")
class MiaExecutorAgentLoop(AgentLoopBase):
    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        rollout = self.config.actor_rollout_ref.rollout
        info = kwargs.get("extra_info") or {}
        question, truth = info["question"], str(kwargs["reward_model"]["ground_truth"])
        plan_steps = [str(step) for step in info.get("plan_steps", [])]  # a numpy array when read from parquet
        tools = _tools(self, info)
        policy = _policy(self, sampling_params)
        # The verl stage runs a single plan without reflection, as the paper's stage 1.
        settings = EpisodeSettings(max_turns=rollout.multi_turn.max_assistant_turns or 8, reflections=0,
                                   executor_max_new_tokens=rollout.response_length, max_seconds=600.0,
                                   plan_shape=_plan_shape(info))
        episode = await self.loop.run_in_executor(None, lambda: run_episode(
            question=question, ground_truth=truth, planner_model=policy, executor_model=policy, tools=tools,
            grader=Grader(), settings=settings, plan_steps=plan_steps))
        reward = episode.executor_reward(tools)
        return policy.output(rollout.response_length, reward=reward.total, **reward.parts)


@register("mia_planner")
class MiaPlannerAgentLoop(AgentLoopBase):
    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        rollout = self.config.actor_rollout_ref.rollout
        info = kwargs.get("extra_info") or {}
        question, truth = info["question"], str(kwargs["reward_model"]["ground_truth"])
        tools = _tools(self, info)
        policy = _policy(self, sampling_params)
        executor = _frozen_executor()
        settings = EpisodeSettings(max_turns=8, reflections=1, planner_max_new_tokens=min(rollout.response_length, 200),
                                   max_seconds=600.0, plan_shape=_plan_shape(info))
        episode = await self.loop.run_in_executor(None, lambda: run_episode(
            question=question, ground_truth=truth, planner_model=policy, executor_model=executor,
            tools=tools, grader=Grader(), settings=settings,
            memory_text=info.get("memory_context", "")))
        reward = episode.planner_reward()
        return policy.output(rollout.response_length, reward=reward.total, **reward.parts)


def _frozen_executor():
    """The stage-2 Executor: the stage-1 checkpoint served at MIA_EXECUTOR_BASE_URL."""
    from backend.llm.openai_compat import OpenAIChatModel

    return OpenAIChatModel(os.environ["MIA_EXECUTOR_BASE_URL"], os.environ["MIA_EXECUTOR_MODEL"])
