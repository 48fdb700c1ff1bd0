"""The canary: a few held-out questions with answers on which a new Planner version must not do
worse than the current one. Greedy episodes (no sampling) and the exact answer rule, so two
versions are compared on the same deterministic footing."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from backend.config import PlannerRewardConfig
from backend.eval.datasets import EvalQuestion, load_questions
from backend.llm.base import ChatModel
from backend.tools.base import Tool
from training.episode import EpisodeSettings, Grader, run_episode


@dataclass
class CanaryResult:
    reward: float
    correct: int
    questions: int
    seconds: float


def load_canary(path: Path, size: int) -> list[EvalQuestion]:
    return load_questions(path, limit=size)


def evaluate_canary(questions: list[EvalQuestion], *, planner_model: ChatModel, executor_model: ChatModel,
                    tools: Mapping[str, Tool], settings: EpisodeSettings,
                    weights: PlannerRewardConfig = PlannerRewardConfig()) -> CanaryResult:
    started = time.perf_counter()
    grader = Grader(None)
    rewards, correct = [], 0
    for q in questions:
        episode = run_episode(question=q.question, ground_truth=q.answer, planner_model=planner_model,
                              executor_model=executor_model, tools=tools, grader=grader, settings=settings)
        rewards.append(episode.planner_reward(weights=weights).total)
        correct += episode.correct_final
    return CanaryResult(sum(rewards) / len(rewards), correct, len(questions), time.perf_counter() - started)
