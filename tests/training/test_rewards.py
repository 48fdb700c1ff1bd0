"""The paper's rewards on hand-computed cases."""

from __future__ import annotations

import pytest

from backend.tools.search import WikiSearchTool
from training.rewards import (
    TraceStep,
    answer_accuracy,
    executor_reward,
    format_problems,
    planner_format_ok,
    planner_reward,
    tags_balanced,
    tool_coverage,
)

SCHEMAS = {"search": WikiSearchTool.parameters, "image_search": {"type": "object", "properties": {"image": {"type": "string"}}, "required": ["image"]}}
GOOD_CALL = TraceStep(tool="search", arguments={"query_list": ["Russian Civil War end"]})
ANSWER = TraceStep(answer="October 1922")


def test_accuracy_bonus_before_replan_and_long_answers_score_zero():
    assert answer_accuracy(correct=True, answer="October 1922", replanned=False) == 1.2
    assert answer_accuracy(correct=True, answer="October 1922", replanned=True) == 1.0
    assert answer_accuracy(correct=False, answer="1921", replanned=False) == 0.0
    assert answer_accuracy(correct=True, answer="x" * 101, replanned=False) == 0.0
    assert answer_accuracy(correct=True, answer="x" * 100, replanned=False) == 1.2


def test_tool_coverage_credits_one_plan_step_per_valid_call():
    bad_args = TraceStep(tool="search", arguments={"query": "no list"})
    assert tool_coverage([GOOD_CALL, bad_args, ANSWER], 3, SCHEMAS) == pytest.approx(1 / 3)
    assert tool_coverage([GOOD_CALL] * 5, 2, SCHEMAS) == 1.0
    assert tool_coverage([TraceStep(tool="browse", arguments={})], 2, SCHEMAS) == 0.0
    assert tool_coverage([GOOD_CALL], 0, SCHEMAS) == 1.0
    assert tool_coverage([], 0, SCHEMAS) == 0.0


def test_executor_reward_weights():
    # correct first time, 1 of 2 plan steps covered, clean format: 0.7*1.2 + 0.2*0.5 + 0.1*1
    reward = executor_reward(correct=True, answer="October 1922", replanned=False, steps=[GOOD_CALL, ANSWER],
                             plan_step_count=2, tool_schemas=SCHEMAS,
                             assistant_texts=["<think>a</think><tool_call>{}</tool_call>", "<think>b</think><answer>October 1922</answer>"])
    assert reward.parts == {"acc": 1.2, "tool": 0.5, "format": 1.0}
    assert reward.total == pytest.approx(0.84 + 0.1 + 0.1)
    # wrong after a replan, unknown tool: 0 + 0.2*0 + 0
    wrong = executor_reward(correct=False, answer="1921", replanned=True, steps=[TraceStep(tool="browse"), TraceStep(answer="1921")],
                            plan_step_count=3, tool_schemas=SCHEMAS)
    assert wrong.total == 0.0


@pytest.mark.parametrize(
    ("steps", "answer", "texts", "expected"),
    [
        ([GOOD_CALL, ANSWER], "October 1922", [], []),
        ([GOOD_CALL], "", [], ["answer missing"]),
        ([TraceStep(tool="browse", arguments={})], "x", [], ["unknown tool 'browse'"]),
        ([TraceStep(tool="search", arguments={"query_list": "a string"})], "x", [], ["invalid arguments for 'search'"]),
        ([TraceStep(tool="image_search", arguments={"image": "a.png"})] * 2, "x", [], ["image search repeated"]),
        ([TraceStep(recovery="no <tool_call> or <answer> in the output")], "x", [], ["unusable output: no <tool_call> or <answer> in the output"]),
        ([TraceStep(answer="x", format_problems=("unclosed <answer>",))], "x", [], ["turn output: unclosed <answer>"]),
        ([ANSWER], "x", ["<think>a<answer>x</answer>"], ["unbalanced tags"]),
    ],
)
def test_format_problems(steps, answer, texts, expected):
    assert format_problems(steps, answer, SCHEMAS, texts) == expected


def test_tags_balanced():
    assert tags_balanced("<think>a</think><tool_call>{}</tool_call> then <think>b</think><answer>c</answer>")
    assert not tags_balanced("</think><think>")
    assert not tags_balanced("<answer><answer>x</answer></answer>")
    assert not tags_balanced("<tool_call>{}")


@pytest.mark.parametrize(
    ("final", "first", "replanned", "fmt", "total", "decision"),
    [
        (True, True, False, True, 0.7 + 0.2 + 0.05 + 0.05, 1.0),  # right, and rightly no replan
        (True, True, True, True, 0.7 + 0.2 + 0.05, 0.0),  # replanned a correct answer
        (True, False, True, True, 0.7 + 0.05 + 0.05, 1.0),  # wrong, replanned, fixed
        (False, False, False, False, 0.0, 0.0),  # wrong and did not replan
        (False, False, True, True, 0.05 + 0.05, 1.0),
    ],
)
def test_planner_reward(final, first, replanned, fmt, total, decision):
    reward = planner_reward(correct_final=final, correct_first=first, replanned=replanned, format_ok=fmt)
    assert reward.total == pytest.approx(total)
    assert reward.parts["decision"] == decision


def test_planner_format_rejects_fallback_plans_and_leaked_answers():
    assert planner_format_ok([False], ["1. Search the civil war"], "October 1922")
    assert not planner_format_ok([True], ["no steps"], "October 1922")
    assert not planner_format_ok([False, False], ["1. Search", "1. Answer is October 1922"], "October 1922")


def test_a_search_the_session_made_after_a_recovery_is_not_the_models_call():
    from backend.executor import Step

    steps = TraceStep.from_steps([
        Step(turn=1, recovery="no <tool_call> or <answer> in the output"),
        Step(turn=1, tool="search", arguments={"query_list": ["the question"]}, ok=True),
        Step(turn=2, tool="search", arguments={"query_list": ["a model query"]}, ok=True),
        Step(turn=3, answer="x"),
    ])
    assert [s.by_recovery for s in steps] == [False, True, False, False]
    assert tool_coverage(steps, 2, SCHEMAS) == 0.5
