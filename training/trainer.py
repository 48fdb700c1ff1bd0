"""Single-machine GRPO for either stage, read top to bottom: sample episodes, score, update, save.

Stage "executor": the policy is the Executor; plans come from the dataset, a frozen Planner reflects.
Stage "planner": the policy is the Planner (plan, reflect, replan); a frozen Executor runs the plans.
With `agent.plan_shape: subquestions` both stages run the app's plan of sub-questions instead
(backend.hops): stage 1's dataset holds the frozen Planner's decompositions and the Executor policy
researches them hop by hop; stage 2's Planner policy decomposes after the records' worked examples.
Progress goes to `<output_dir>/log.jsonl` (one line per step) and a tqdm bar.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from backend.config import RewardConfig
from backend.llm.embedded import EmbeddedChatModel, get_embedded_model, prepare_embedded_model
from backend.llm.tiny import build_tiny_random_model
from backend.planner import Planner
from backend.tools import Tool, build_tools
from backend.tools.base import tool_names_line
from training.datasets import (
    STAGES,
    RLRecord,
    empty_memories,
    load_hotpotqa,
    read_records,
    stage1_records,
    stage2_records,
    with_memories,
)
from training.episode import Episode, EpisodeSettings, Grader, run_episode
from training.grpo import group_advantages, grpo_update
from training.grpo_config import GRPOSettings, TrainingConfigError
from training.policy import PolicyChatModel
from training.rewards import Reward


def resolve_model_dir(value: str, cache_dir: Path, settings: GRPOSettings) -> Path:
    if value == "tiny-random":
        target = cache_dir / "models" / "tiny-random"
        if not (target / "config.json").is_file():
            build_tiny_random_model(target)
        return target
    if value == "smollm2":
        return prepare_embedded_model(cache_dir / "models", progress=False)
    path = settings.resolve(value)
    if not (path / "config.json").is_file():
        raise TrainingConfigError(
            f"model folder {path} has no config.json; use 'tiny-random', 'smollm2' or a saved checkpoint folder."
        )
    return path


def stage_tools(settings: GRPOSettings) -> dict[str, Tool]:
    """The Executor's tools: the YAML's agent.tools as the app builds them, without web access (the
    wiki index under cache_dir/index)."""
    return build_tools(settings.agent.tools, cache_dir=settings.cache_path / "index", web_enabled=False,
                       progress=False, guided=settings.guided_actions)


def score_episode(stage: str, episode: Episode, tools: dict[str, Tool], rewards: RewardConfig = RewardConfig()) -> Reward:
    if stage == "executor":
        return episode.executor_reward(tools, rewards.executor)
    return episode.planner_reward(weights=rewards.planner)


@dataclass
class StepLog:
    step: int
    mean_reward: float
    reward_parts: dict[str, float]
    loss: float
    tokens: int
    clipped_fraction: float
    grad_norm: float
    seconds: float


@dataclass
class StageResult:
    stage: str
    checkpoint: Path
    steps: list[StepLog]
    peak_rss_mb: float


class StageTrainer:
    """Holds the policy, the frozen partner, the tools and the data of one stage."""

    def __init__(self, stage: str, settings: GRPOSettings, *, records: list[RLRecord] | None = None,
                 tools: dict[str, Tool] | None = None) -> None:
        if stage not in STAGES:
            raise TrainingConfigError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}.")
        self.stage, self.settings = stage, settings
        random.seed(settings.seed)
        torch.manual_seed(settings.seed)
        if settings.threads:
            torch.set_num_threads(settings.threads)
        cache = settings.cache_path
        self.tools = tools or stage_tools(settings)
        policy_dir = resolve_model_dir(settings.model_dir, cache, settings)
        partner_dir = resolve_model_dir(settings.partner_model_dir or settings.model_dir, cache, settings)
        self.policy = PolicyChatModel(policy_dir, temperature=settings.temperature, lora=settings.lora)
        self.partner: EmbeddedChatModel = get_embedded_model(partner_dir)
        self.grader = Grader(self.partner if settings.judge == "model" else None)
        self.episode_settings = EpisodeSettings(
            max_turns=settings.max_turns,
            executor_max_new_tokens=settings.executor_max_new_tokens,
            planner_max_new_tokens=settings.planner_max_new_tokens,
            reflections=settings.reflections,
            guided=settings.guided_actions,
            plan_shape=settings.plan_shape,
            follow_links=settings.agent.follow_links,
        )
        self.records = records if records is not None else self._load_records()
        self._check_plan_shapes(self.records)
        self.optimizer = torch.optim.AdamW(self.policy.trainable_parameters(), lr=settings.learning_rate, weight_decay=0.0)

    def _load_records(self) -> list[RLRecord]:
        s = self.settings
        if s.dataset_file:
            return read_records(s.resolve(s.dataset_file))[: s.num_questions]
        items = with_memories(load_hotpotqa(s.resolve(s.questions_file), s.num_questions), empty_memories(s.plan_shape))
        if self.stage == "planner":
            return stage2_records(items, s.plan_shape)
        planner = Planner(self.partner, max_new_tokens=s.planner_max_new_tokens)
        return stage1_records(items, planner, tool_names_line(self.tools.values()), s.plan_shape)

    def _check_plan_shapes(self, records: list[RLRecord]) -> None:
        """A record's plan and memory text are of one plan shape; training another would prompt the
        roles unlike the app."""
        shape = self.settings.plan_shape
        other = sorted({r.plan_shape for r in records} - {shape})
        if other:
            where = f"dataset_file {self.settings.dataset_file}" if self.settings.dataset_file else "a given record"
            raise TrainingConfigError(
                f"agent.plan_shape is {shape!r} but {where} holds plans of shape {other[0]!r}; rebuild the dataset "
                f"with `python -m training dataset --plan-shape {shape} ...` or set agent.plan_shape: {other[0]}."
            )

    def episode(self, record: RLRecord, *, record_turns: bool) -> tuple[Episode, list]:
        """One rollout; with record_turns the policy samples and its decisions are returned."""
        if record_turns:
            self.policy.begin_episode()
        planner_model, executor_model = (
            (self.partner, self.policy) if self.stage == "executor" else (self.policy, self.partner)
        )
        try:
            episode = run_episode(
                question=record.question, ground_truth=record.ground_truth,
                planner_model=planner_model, executor_model=executor_model, tools=self.tools,
                grader=self.grader, settings=self.episode_settings, memory_text=record.memory_context,
                plan_steps=list(record.plan_steps) if self.stage == "executor" else None,
            )
        finally:
            samples = self.policy.end_episode() if record_turns else []
        return episode, samples

    def evaluate(
        self, records: list[RLRecord], rollouts: int = 1, *,
        on_rollout: Callable[[int, int, Reward, float], None] | None = None,
    ) -> list[Reward]:
        """Rewards of sampled rollouts (the same sampling as training) over `records`, record by
        record; `on_rollout(record number, rollout number, reward, seconds)` follows each one."""
        rewards = []
        for i, record in enumerate(records, 1):
            for j in range(1, rollouts + 1):
                started = time.perf_counter()
                episode, _ = self.episode(record, record_turns=True)
                rewards.append(score_episode(self.stage, episode, self.tools, self.settings.rewards))
                if on_rollout is not None:
                    on_rollout(i, j, rewards[-1], time.perf_counter() - started)
        return rewards

    def train(self, *, log_path: Path | None = None) -> list[StepLog]:
        s = self.settings
        order = list(range(len(self.records)))
        random.shuffle(order)
        logs: list[StepLog] = []
        cursor = 0
        for step in tqdm(range(1, s.steps + 1), desc=f"GRPO {self.stage}", unit="step"):
            started = time.perf_counter()
            batch = []
            for _ in range(s.questions_per_step):
                batch.append(self.records[order[cursor % len(order)]])
                cursor += 1
            episodes, rewards = [], []
            for record in batch:
                for _ in range(s.rollouts_per_question):
                    episode, samples = self.episode(record, record_turns=True)
                    reward = score_episode(self.stage, episode, self.tools, self.settings.rewards)
                    episodes.append(samples)
                    rewards.append(reward)
            advantages = group_advantages([r.total for r in rewards], s.rollouts_per_question)
            stats = grpo_update(
                self.policy.model, self.optimizer, list(zip(episodes, advantages)),
                temperature=s.temperature, clip_low=s.clip_low, clip_high=s.clip_high,
                updates_per_batch=s.updates_per_batch, max_grad_norm=s.max_grad_norm,
            )
            parts = {k: sum(r.parts[k] for r in rewards) / len(rewards) for k in rewards[0].parts}
            log = StepLog(step, sum(r.total for r in rewards) / len(rewards), parts, stats.loss, stats.tokens,
                          stats.clipped_fraction, stats.grad_norm, time.perf_counter() - started)
            logs.append(log)
            if log_path is not None:
                log_path.parent.mkdir(parents=True, exist_ok=True)
                with log_path.open("a", encoding="utf-8") as fp:
                    fp.write(json.dumps({"stage": self.stage, **asdict(log)}) + "\n")
        return logs

    def save(self, target: Path) -> Path:
        return self.policy.save(target, display_name=f"{Path(self.policy.model_dir).name}-grpo-{self.stage}")


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def train_stage(stage: str, settings: GRPOSettings, *, records: list[RLRecord] | None = None,
                tools: dict[str, Tool] | None = None, output_dir: Path | None = None) -> StageResult:
    output = output_dir or settings.output_path
    trainer = StageTrainer(stage, settings, records=records, tools=tools)
    logs = trainer.train(log_path=output / "log.jsonl")
    checkpoint = trainer.save(output / f"{stage}-final")
    return StageResult(stage, checkpoint, logs, peak_rss_mb())
