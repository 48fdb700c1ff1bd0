"""One research episode as both GRPO stages see it: plan, execute, reflect, maybe replan, grade.

Stage 1 (Executor) gives a fixed plan from the dataset and a frozen Planner reflects; stage 2
(Planner) lets the policy plan, a frozen Executor runs the plan, and the policy reflects and
replans. The roles are the app's own (`Planner`, `ExecutorSession`), so the prompts match.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from backend.executor import ExecutorSession, Step
from backend.judge import Judge, answer_contains
from backend.llm.base import ChatModel
from backend.metering import RunMeter
from backend.planner import Planner
from backend.tools.base import Tool, tool_prompt_lines
from training.rewards import Reward, planner_format_ok, planner_reward

JUDGES = ("exact", "model")


class Grader:
    """Correctness against ground truth: the Judge's exact-match rule, or the full Judge with a model."""

    def __init__(self, judge_model: ChatModel | None = None) -> None:
        self.judge = Judge(judge_model) if judge_model is not None else None

    def correct(self, question: str, answer: str, ground_truth: str) -> bool:
        if self.judge is None:
            return answer_contains(answer, ground_truth)
        return self.judge.grade(question, answer, ground_truth).correct


@dataclass
class EpisodeSettings:
    max_turns: int = 2
    executor_max_new_tokens: int = 96
    planner_max_new_tokens: int = 96
    reflections: int = 1
    max_seconds: float = 300.0
    guided: bool = False  # the Executor's guided turns, as the app runs the embedded model


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

    @property
    def tool_calls(self) -> int:
        return sum(1 for step in self.steps if step.tool)

    def planner_reward(self, gold: str | None = None) -> Reward:
        """The Planner's reward for this episode; `gold` (default: the ground truth) is the answer
        no plan may state ("" when none is known)."""
        gold = self.ground_truth if gold is None else gold
        return planner_reward(
            correct_final=self.correct_final, correct_first=self.correct_first, replanned=self.replanned,
            format_ok=planner_format_ok(self.plans_recovered, self.plan_texts, gold),
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
    planner = Planner(planner_model, max_new_tokens=settings.planner_max_new_tokens)
    plan_texts: list[str] = []
    recovered: list[bool] = []
    if plan_steps is None:
        blueprint = planner.plan(question, memory_text, tool_prompt_lines(tools.values()))
        plan_steps = list(blueprint.steps)
        plan_texts.append(blueprint.text)
        recovered.append(blueprint.recovered is not None)
    steps_done = list(plan_steps)
    first_plan_step_count = len(steps_done)
    session = ExecutorSession(executor_model, tools, RunMeter(), f"train-{uuid.uuid4().hex[:8]}",
                              max_new_tokens=settings.executor_max_new_tokens, guided=settings.guided)
    session.start(question, steps_done)
    deadline = time.monotonic() + settings.max_seconds
    for _ in session.run(question, max_turns=settings.max_turns, deadline=deadline):
        pass
    first_answer = session.answer
    correct_first = grader.correct(question, first_answer, ground_truth)
    replanned = False
    for _ in range(settings.reflections):
        reflection = planner.reflect(question, session.answer, session.trace_text(),
                                     support=session.answer_support(question))
        if not reflection.replan:
            break
        replanned = True
        supplement = planner.replan(question, session.answer, session.trace_text(), steps_done)
        plan_texts.append(supplement.text)
        recovered.append(supplement.recovered is not None)
        steps_done.extend(supplement.steps)
        session.add_supplementary_plan(supplement.steps)
        for _ in session.run(question, max_turns=settings.max_turns, deadline=deadline):
            pass
        for _ in session.settle_after_replan():
            pass
    answer = session.answer
    correct_final = correct_first if answer == first_answer else grader.correct(question, answer, ground_truth)
    return Episode(
        question=question,
        ground_truth=ground_truth,
        plan_steps=steps_done,
        plan_texts=plan_texts,
        plans_recovered=recovered,
        first_answer=first_answer,
        answer=answer,
        replanned=replanned,
        correct_first=correct_first,
        correct_final=correct_final,
        steps=list(session.steps),
        passages=list(session.passages),
        assistant_texts=[turn.content for turn in session.turns if turn.role == "assistant"],
        first_plan_step_count=first_plan_step_count,
        trace_text=session.trace_text(),
        seconds=time.perf_counter() - started,
    )
