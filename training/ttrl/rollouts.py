"""One signal's rollouts: the Planner (the policy being trained) proposes n plans, the frozen
Executor runs each, the Judge grades them against the signal; then the non-parametric side: the
Manager stores the shortest correct and one incorrect trajectory and credits the memories used."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from backend.config import PlannerRewardConfig
from backend.llm.base import ChatModel
from backend.llm.memo import CallFile, RepeatedCalls
from backend.episode import planner_memories
from backend.events import RunFinished
from backend.manager import Manager
from memory_db.provenance import LEARNING, Provenance
from backend.tools.base import Tool
from training.datasets import memories_text
from training.episode import Episode, EpisodeSettings, run_episode
from training.policy import PolicyChatModel, TurnSample
from training.rewards import Reward
from training.ttrl.signals import Signal


@dataclass
class ScoredRollout:
    episode: Episode
    samples: list[TurnSample]
    reward: Reward


ROLLOUT_STATS = ("wall_seconds", "llm_seconds", "llm_calls", "prompt_tokens", "cached_prompt_tokens",
                 "completion_tokens", "calls_planner", "calls_executor")


def rollout_stats(rollout: ScoredRollout) -> dict:
    """Where one rollout's time went (the run's meter, as RunFinished reports it): for signals.jsonl."""
    stats = next((e.stats for e in reversed(rollout.episode.events) if isinstance(e, RunFinished)), {})
    return {key: stats.get(key, 0) for key in ROLLOUT_STATS}


@dataclass
class SignalOutcome:
    signal: Signal
    rollouts: list[ScoredRollout]
    memories_used: list[str]
    stored: list[str]  # ids of the memories consolidation stored
    seconds: float

    @property
    def mean_reward(self) -> float:
        return sum(r.reward.total for r in self.rollouts) / len(self.rollouts)

    @property
    def correct_count(self) -> int:
        return sum(r.episode.correct_final for r in self.rollouts)


def score(episode: Episode, signal: Signal, weights: PlannerRewardConfig = PlannerRewardConfig()) -> Reward:
    return episode.planner_reward(signal.answer if signal.kind == "ground_truth" else "", weights=weights)


def run_rollouts(signal: Signal, *, policy: PolicyChatModel, executor_model: ChatModel, tools: Mapping[str, Tool],
                 grader, settings: EpisodeSettings, memory_text: str, n: int,
                 weights: PlannerRewardConfig = PlannerRewardConfig(),
                 shared_calls: CallFile | None = None) -> list[ScoredRollout]:
    """n sampled episodes with the policy as Planner; each keeps the policy's decisions for GRPO. The
    frozen Executor's greedy calls that an earlier rollout already made are answered from it
    (backend.llm.memo): rollouts whose plans lead to the same turns cost one Executor run; with
    `shared_calls`, so do the turns another learner's rollouts already made."""
    executor_model = RepeatedCalls(executor_model, shared=shared_calls)
    rollouts = []
    for _ in range(n):
        policy.begin_episode()
        try:
            episode = run_episode(
                question=signal.question, ground_truth=signal.answer, planner_model=policy,
                executor_model=executor_model, tools=tools, grader=grader, settings=settings, memory_text=memory_text,
            )
        finally:
            samples = policy.end_episode()
        rollouts.append(ScoredRollout(episode, samples, score(episode, signal, weights)))
    return rollouts


def shortest_correct_and_one_incorrect(rollouts: list[ScoredRollout]) -> list[ScoredRollout]:
    """The correct rollout with the fewest Executor steps (then the shortest trace), and the first incorrect one."""
    correct = [r for r in rollouts if r.episode.correct_final]
    incorrect = [r for r in rollouts if not r.episode.correct_final]
    chosen = []
    if correct:
        chosen.append(min(correct, key=lambda r: (len(r.episode.steps), len(r.episode.trace_text))))
    if incorrect:
        chosen.append(incorrect[0])
    return chosen


def consolidate(signal: Signal, rollouts: list[ScoredRollout], *, manager: Manager, memories_used: list[str],
                version: str) -> list[str]:
    """Store the chosen trajectories as memories and give the memories used one outcome.

    The used memories are credited once per signal, with the majority verdict of the rollouts, so a
    signal weighs as much as one question asked in the app.
    """
    stored = []
    for rollout in shortest_correct_and_one_incorrect(rollouts):
        ep = rollout.episode
        memory = manager.consolidate(
            question=signal.question, caption=None,
            plan_steps=ep.plan_steps, steps=ep.steps, passages=ep.passages, answer=ep.answer,
            verdict="correct" if ep.correct_final else "incorrect", namespace=signal.namespace,
            provenance=Provenance(
                origin=LEARNING, signal=signal.source, signal_kind=signal.kind,
                # graded against a known answer (ground truth, a thumbs-up's answer) or only by the Judge
                verified=signal.kind == "ground_truth",
                verdict_source="ground_truth" if signal.kind == "ground_truth" else "judge",
                ground_truth=signal.answer if signal.kind == "ground_truth" else None,
                answer=ep.answer, first_answer=ep.first_answer, planner_version=version,
                rollouts=len(rollouts), reward=rollout.reward.total, memories_used=memories_used,
                trajectory=f"{ep.trace_text[:3000]}\nAnswer: {ep.answer}",
                decomposition=list(ep.hops) or None,  # a plan of sub-questions, a worked example later
            ),
            keep_contrast=True,
        ).memory
        stored.append(memory.id)
    if memories_used:
        majority = sum(r.episode.correct_final for r in rollouts) * 2 >= len(rollouts)
        manager.store.record_outcome(memories_used, correct=majority, namespace=signal.namespace, missing_ok=True)
    return stored


@dataclass
class ShownMemories:
    text: str  # what the Planner is shown
    used: list[str]  # the memories' ids
    successful_plans: list[str]  # the plans of the successful ones (a stream's selection compares with them)


def memory_context(manager: Manager, signal: Signal, settings: EpisodeSettings) -> ShownMemories:
    """The Planner's memories for the signal's question, retrieved and shown as the app does: contrastive
    memories, or for a plan of sub-questions the worked examples among them."""
    successful, failed = planner_memories(manager, signal.question, signal.namespace, None, settings)
    return ShownMemories(memories_text(successful, failed, settings.plan_shape), [m["id"] for m in successful + failed], [m["plan"] for m in successful])
