"""A research episode as both GRPO stages and test-time learning score it.

The episode is the app's own loop (backend.episode.EpisodeLoop, method `mia`, no memory store):
stage 1 (Executor) gives it a fixed plan from the dataset and a frozen Planner reflects; stage 2
(Planner) lets the policy plan, a frozen Executor runs the plan, and the policy reflects and
replans. Training adds by composition what it needs: a policy model that samples and records its
tokens, the grader below as the judge, and the reward read off the outcome.

On `settings.plan_shape == "subquestions"` the plan is a decomposition (backend.hops): stage 1's given
plan is its sub-questions, researched hop by hop; stage 2's Planner decomposes after `memory_text`'s
worked examples. The episode's `plan_steps` are then the hops as written, which the rewards read as
the plan's steps (the Executor's tool part is min(valid calls, hops) / hops).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from backend.config import ExecutorRewardConfig, PlannerRewardConfig
from backend.episode import EpisodeInput, EpisodeLoop, EpisodeSettings
from backend.events import TextDelta
from backend.executor import Step
from backend.judge import CORRECT, FROM_GROUND_TRUTH, INCORRECT, Judge, Verdict, answer_contains
from backend.llm.base import ChatModel
from backend.methods import METHODS
from backend.question import Question
from backend.tools.base import Tool, once_per_question_tools
from training.rewards import Reward, TraceStep, executor_reward, planner_format_ok, planner_reward

JUDGES = ("exact", "model")
__all__ = ["Episode", "EpisodeSettings", "Grader", "JUDGES", "run_episode"]


class Grader:
    """Correctness against ground truth: the Judge's exact-match rule, or the full Judge with a model."""

    def __init__(self, judge_model: ChatModel | None = None) -> None:
        self.judge = Judge(judge_model) if judge_model is not None else None

    def correct(self, question: str, answer: str, ground_truth: str) -> bool:
        if self.judge is None:
            return answer_contains(answer, ground_truth)
        return self.judge.grade(question, answer, ground_truth).correct


class GraderJudge:
    """A grader's `correct(question, answer, ground_truth)` as the episode loop's judge."""

    def __init__(self, grader) -> None:
        self.grader = grader

    def grade(self, question: Question, answer: str, ground_truth: str) -> Verdict:
        correct = self.grader.correct(question.text, answer, ground_truth)
        return Verdict(CORRECT if correct else INCORRECT, "training-grader", source=FROM_GROUND_TRUTH)

    def evaluate_without_ground_truth(self, question: Question, answer: str, passages: list[dict]) -> Verdict:
        return self.grade(question, answer, "")


@dataclass
class Episode:
    question: str
    ground_truth: str
    plan_steps: list[str]
    plan_texts: list[str]
    plans_recovered: list[bool]
    first_answer: str
    answer: str
    replanned: bool
    correct_first: bool
    correct_final: bool
    steps: list[Step] = field(default_factory=list)
    passages: list[dict] = field(default_factory=list)
    assistant_texts: list[str] = field(default_factory=list)
    first_plan_step_count: int = 0
    trace_text: str = ""
    seconds: float = 0.0
    events: list = field(default_factory=list)  # the episode's events, as the app's run yields them
    hops: list[dict] = field(default_factory=list)  # a plan of sub-questions as researched (backend.hops.Hop.to_dict)

    @property
    def tool_calls(self) -> int:
        return sum(1 for step in self.steps if step.tool)

    def executor_reward(self, tools: Mapping[str, Tool],
                        weights: ExecutorRewardConfig = ExecutorRewardConfig()) -> Reward:
        """The Executor's reward for this episode with `tools` offered; `weights`: rewards.executor."""
        return executor_reward(
            correct=self.correct_final, answer=self.answer, replanned=self.replanned,
            steps=TraceStep.from_steps(self.steps), plan_step_count=len(self.plan_steps),
            tool_schemas={name: tool.parameters for name, tool in tools.items()},
            assistant_texts=self.assistant_texts, once_per_question=once_per_question_tools(tools.values()),
            weights=weights,
        )

    def planner_reward(self, gold: str | None = None, weights: PlannerRewardConfig = PlannerRewardConfig()) -> Reward:
        """The Planner's reward for this episode; `gold` (default: the ground truth) is the answer
        no plan may state ("" when none is known); `weights`: the config's rewards.planner."""
        gold = self.ground_truth if gold is None else gold
        return planner_reward(
            correct_final=self.correct_final, correct_first=self.correct_first, replanned=self.replanned,
            format_ok=planner_format_ok(self.plans_recovered, self.plan_texts, gold), weights=weights,
        )


def run_episode(
    *,
    question: str,
    ground_truth: str,
    planner_model: ChatModel,
    executor_model: ChatModel,
    tools: Mapping[str, Tool],
    grader: Grader,
    settings: EpisodeSettings,
    memory_text: str = "",
    plan_steps: list[str] | None = None,
) -> Episode:
    started = time.perf_counter()
    loop = EpisodeLoop(
        models={"planner": planner_model, "executor": executor_model}, tools=tools, method=METHODS["mia"],
        settings=settings, judge=GraderJudge(grader), run_id=f"train-{uuid.uuid4().hex[:8]}",
    )
    events = [event for event in loop.run(EpisodeInput(question=question, ground_truth=ground_truth,
                                                        memory_text=memory_text, plan_steps=plan_steps))
              if not isinstance(event, TextDelta)]
    outcome = loop.outcome
    session = outcome.session
    correct_final = outcome.verdict.label == CORRECT
    correct_first = correct_final if outcome.first_answer == outcome.answer else grader.correct(
        question, outcome.first_answer, ground_truth)
    return Episode(
        question=question,
        ground_truth=ground_truth,
        plan_steps=outcome.plan_steps,
        plan_texts=[plan.text for plan in outcome.plans],
        plans_recovered=[plan.recovered is not None for plan in outcome.plans],
        first_answer=outcome.first_answer,
        answer=outcome.answer,
        replanned=outcome.replanned,
        correct_first=correct_first,
        correct_final=correct_final,
        steps=list(session.steps),
        passages=list(session.passages),
        assistant_texts=[turn.content for turn in session.turns if turn.role == "assistant"],
        first_plan_step_count=outcome.first_plan_step_count,
        trace_text=session.trace_text(),
        seconds=time.perf_counter() - started,
        events=events,
        hops=[hop.to_dict() for hop in outcome.hops],
    )
