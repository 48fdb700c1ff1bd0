"""The paper's rewards on hand-computed cases."""

from __future__ import annotations

import pytest

from backend.config import ExecutorRewardConfig, PlannerRewardConfig
from backend.tools.base import once_per_question_tools
from backend.tools.image_search import ImageSearchTool
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
        ([TraceStep(tool="image_search", arguments={"image": "a.png"})] * 2, "x", [], []),  # not named once per question
        ([TraceStep(recovery="no <tool_call> or <answer> in the output")], "x", [], ["unusable output: no <tool_call> or <answer> in the output"]),
        ([TraceStep(answer="x", format_problems=("unclosed <answer>",))], "x", [], ["turn output: unclosed <answer>"]),
        ([ANSWER], "x", ["<think>a<answer>x</answer>"], ["unbalanced tags"]),
    ],
)
def test_format_problems(steps, answer, texts, expected):
    assert format_problems(steps, answer, SCHEMAS, texts) == expected


def test_a_repeated_once_per_question_tool_costs_the_format_reward_only_when_named():
    once = once_per_question_tools([WikiSearchTool, ImageSearchTool])
    assert once == frozenset({"image_search"})  # declared by the tool (capabilities.once_per_question)
    image = TraceStep(tool="image_search", arguments={"image": "a.png"})
    twice = [image, image, ANSWER]
    assert format_problems(twice, "October 1922", SCHEMAS, once_per_question=once) == [
        "'image_search' called more than once (once per question)"]
    assert format_problems([image, GOOD_CALL, GOOD_CALL, ANSWER], "October 1922", SCHEMAS, once_per_question=once) == []
    named = executor_reward(correct=True, answer="October 1922", replanned=False, steps=twice, plan_step_count=2,
                            tool_schemas=SCHEMAS, once_per_question=once)
    unnamed = executor_reward(correct=True, answer="October 1922", replanned=False, steps=twice, plan_step_count=2,
                              tool_schemas=SCHEMAS)
    assert (named.parts["format"], unnamed.parts["format"]) == (0.0, 1.0)
    assert unnamed.total - named.total == pytest.approx(0.1)
    search_named = executor_reward(correct=True, answer="October 1922", replanned=False, steps=[GOOD_CALL, GOOD_CALL, ANSWER],
                                   plan_step_count=2, tool_schemas=SCHEMAS, once_per_question=frozenset({"search"}))
    assert search_named.parts["format"] == 0.0


def test_executor_reward_with_other_weights_is_their_weighted_sum():
    weights = ExecutorRewardConfig(acc_weight=0.5, tool_weight=0.3, format_weight=0.2,
                                   acc_before_replan=2.0, acc_after_replan=0.5, max_answer_chars=10)
    common = dict(steps=[GOOD_CALL, ANSWER], plan_step_count=2, tool_schemas=SCHEMAS, weights=weights)
    first = executor_reward(correct=True, answer="1922", replanned=False, **common)
    assert first.parts == {"acc": 2.0, "tool": 0.5, "format": 1.0}
    assert first.total == pytest.approx(0.5 * 2.0 + 0.3 * 0.5 + 0.2 * 1.0)
    after = executor_reward(correct=True, answer="1922", replanned=True, **common)
    assert after.total == pytest.approx(0.5 * 0.5 + 0.3 * 0.5 + 0.2)
    too_long = executor_reward(correct=True, answer="October 1922", replanned=False, **common)  # 12 chars > 10
    assert too_long.parts["acc"] == 0.0 and too_long.total == pytest.approx(0.3 * 0.5 + 0.2)
    assert answer_accuracy(correct=True, answer="x" * 10, replanned=False, weights=weights) == 2.0


def test_planner_reward_with_other_weights_is_their_weighted_sum():
    weights = PlannerRewardConfig(acc_final_weight=0.4, acc_first_weight=0.3, format_weight=0.2, decision_weight=0.1)
    reward = planner_reward(correct_final=True, correct_first=False, replanned=True, format_ok=False, weights=weights)
    assert reward.parts == {"acc_final": 1.0, "acc_first": 0.0, "format": 0.0, "decision": 1.0}
    assert reward.total == pytest.approx(0.4 + 0.1)
    only_format = PlannerRewardConfig(acc_final_weight=0, acc_first_weight=0, format_weight=1, decision_weight=0)
    assert planner_reward(correct_final=False, correct_first=False, replanned=False, format_ok=True,
                          weights=only_format).total == 1.0


def test_the_default_weights_are_the_papers():
    e, p = ExecutorRewardConfig(), PlannerRewardConfig()
    assert (e.acc_weight, e.tool_weight, e.format_weight) == (0.7, 0.2, 0.1)
    assert (e.acc_before_replan, e.acc_after_replan, e.max_answer_chars) == (1.2, 1.0, 100)
    assert (p.acc_final_weight, p.acc_first_weight, p.format_weight, p.decision_weight) == (0.7, 0.2, 0.05, 0.05)


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
