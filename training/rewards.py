"""The paper's rewards for the two GRPO stages; every trainer (TRL-style loop, verl) uses these.

Executor: ``R = 0.7 * acc + 0.2 * tool + 0.1 * format``
  acc    1.2 correct before any replan, 1.0 correct after a replan, 0 wrong or answer > 100 chars
  tool   fraction of plan steps covered by at least one valid tool call (the i-th valid call
         is credited to the i-th step, so it is min(valid calls, steps) / steps)
  format 1 unless tags are unbalanced, the output was unusable (a recovery), the answer is
         missing, a tool is unknown, its arguments are invalid, or a tool declared once per
         question (`once_per_question`: the names from backend.tools.base.once_per_question_tools)
         was called more than once

Planner: ``R = 0.7 * acc_final + 0.2 * acc_first + 0.05 * format + 0.05 * decision``
  decision 1 when the replan choice was right: no after a correct first answer, yes after a
  wrong one.

The numbers are the defaults of `weights` (backend.config.ExecutorRewardConfig and
PlannerRewardConfig: mia.toml's `[rewards.executor]` / `[rewards.planner]`, a training YAML's
`rewards:`); a caller passes its config's to train with others.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from backend import protocol
from backend.config import ExecutorRewardConfig, PlannerRewardConfig
from backend.judge import answer_contains
from backend.tools.base import argument_problems

PAPER_EXECUTOR_WEIGHTS = ExecutorRewardConfig()
PAPER_PLANNER_WEIGHTS = PlannerRewardConfig()
_TAG_PAIRS = (
    (protocol.THINK_OPEN, protocol.THINK_CLOSE),
    (protocol.CALL_OPEN, protocol.CALL_CLOSE),
    (protocol.ANSWER_OPEN, protocol.ANSWER_CLOSE),
)


@dataclass(frozen=True)
class TraceStep:
    """What the rewards need from one Executor step (a subset of backend.executor.Step)."""

    tool: str | None = None
    arguments: dict = field(default_factory=dict)
    answer: str | None = None
    recovery: str | None = None
    format_problems: tuple[str, ...] = ()
    by_recovery: bool = False  # a call the session made for the model after an unusable turn

    @classmethod
    def from_steps(cls, steps: Sequence) -> list[TraceStep]:
        """backend.executor.Step entries; a tool call right after a recovery is the session's, not the model's."""
        converted: list[TraceStep] = []
        for step in steps:
            after_recovery = bool(converted) and converted[-1].recovery is not None and step.tool is not None
            converted.append(cls(
                tool=step.tool,
                arguments=dict(step.arguments or {}),
                answer=step.answer,
                recovery=step.recovery,
                format_problems=tuple(step.format_problems or ()),
                by_recovery=after_recovery,
            ))
        return converted


@dataclass(frozen=True)
class Reward:
    total: float
    parts: dict[str, float]


def answer_accuracy(*, correct: bool, answer: str, replanned: bool,
                    weights: ExecutorRewardConfig = PAPER_EXECUTOR_WEIGHTS) -> float:
    if not correct or len(answer.strip()) > weights.max_answer_chars:
        return 0.0
    return weights.acc_after_replan if replanned else weights.acc_before_replan


def is_valid_call(step: TraceStep, tool_schemas: Mapping[str, dict]) -> bool:
    return step.tool in tool_schemas and not argument_problems(tool_schemas[step.tool], step.arguments)


def tool_coverage(steps: Sequence[TraceStep], plan_step_count: int, tool_schemas: Mapping[str, dict]) -> float:
    valid_calls = sum(1 for step in steps if step.tool is not None and not step.by_recovery and is_valid_call(step, tool_schemas))
    if plan_step_count <= 0:  # no plan (the Executor-alone baseline): any valid call covers it
        return 1.0 if valid_calls else 0.0
    return min(valid_calls, plan_step_count) / plan_step_count


def tags_balanced(text: str) -> bool:
    """Each of think / tool_call / answer opened as often as closed, and never closed before opened."""
    for open_tag, close_tag in _TAG_PAIRS:
        depth = 0
        for match in re.finditer(re.escape(open_tag) + "|" + re.escape(close_tag), text):
            depth += 1 if match.group() == open_tag else -1
            if depth < 0 or depth > 1:
                return False
        if depth != 0:
            return False
    return True


def format_problems(
    steps: Sequence[TraceStep], answer: str, tool_schemas: Mapping[str, dict], assistant_texts: Sequence[str] = (),
    *, once_per_question: frozenset[str] = frozenset(),
) -> list[str]:
    """Every reason the episode fails the format check (empty list = format reward 1).
    `once_per_question`: the tools declared once per question (once_per_question_tools(tools))."""
    problems: list[str] = []
    for step in steps:
        problems += [f"turn output: {p}" for p in step.format_problems]
        if step.recovery:
            problems.append(f"unusable output: {step.recovery}")
        if step.tool is not None:
            if step.tool not in tool_schemas:
                problems.append(f"unknown tool {step.tool!r}")
            elif argument_problems(tool_schemas[step.tool], step.arguments):
                problems.append(f"invalid arguments for {step.tool!r}")
    problems += ["unbalanced tags" for text in assistant_texts if not tags_balanced(text)][:1]
    if not answer.strip():
        problems.append("answer missing")
    for name in sorted(once_per_question):
        if sum(1 for step in steps if step.tool == name) > 1:
            problems.append(f"{name!r} called more than once (once per question)")
    return problems


def executor_reward(
    *,
    correct: bool,
    answer: str,
    replanned: bool,
    steps: Sequence[TraceStep],
    plan_step_count: int,
    tool_schemas: Mapping[str, dict],
    assistant_texts: Sequence[str] = (),
    once_per_question: frozenset[str] = frozenset(),
    weights: ExecutorRewardConfig = PAPER_EXECUTOR_WEIGHTS,
) -> Reward:
    """`once_per_question`: the tools a second call of which costs the format reward
    (backend.tools.base.once_per_question_tools over the episode's tools); `weights`: the config's
    `rewards.executor` (default: the paper's)."""
    acc = answer_accuracy(correct=correct, answer=answer, replanned=replanned, weights=weights)
    tool = tool_coverage(steps, plan_step_count, tool_schemas)
    problems = format_problems(steps, answer, tool_schemas, assistant_texts, once_per_question=once_per_question)
    fmt = 0.0 if problems else 1.0
    total = weights.acc_weight * acc + weights.tool_weight * tool + weights.format_weight * fmt
    return Reward(total, {"acc": acc, "tool": tool, "format": fmt})


def replan_decision_right(*, correct_first: bool, replanned: bool) -> bool:
    return replanned != correct_first


def planner_reward(*, correct_final: bool, correct_first: bool, replanned: bool, format_ok: bool,
                   weights: PlannerRewardConfig = PAPER_PLANNER_WEIGHTS) -> Reward:
    """`weights`: the config's `rewards.planner` (default: the paper's)."""
    decision = 1.0 if replan_decision_right(correct_first=correct_first, replanned=replanned) else 0.0
    parts = {
        "acc_final": float(correct_final),
        "acc_first": float(correct_first),
        "format": float(format_ok),
        "decision": decision,
    }
    total = (weights.acc_final_weight * parts["acc_final"] + weights.acc_first_weight * parts["acc_first"]
             + weights.format_weight * parts["format"] + weights.decision_weight * decision)
    return Reward(total, parts)


def planner_format_ok(plan_texts_recovered: Sequence[bool], plan_texts: Sequence[str], ground_truth: str) -> bool:
    """Every plan parsed into numbered steps without a fallback, and none states the gold answer."""
    if any(plan_texts_recovered):
        return False
    return not any(ground_truth and answer_contains(text, ground_truth) for text in plan_texts)
