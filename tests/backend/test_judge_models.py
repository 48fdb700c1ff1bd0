"""Both judges on real embedded models: labels always come from a constrained choice."""

from __future__ import annotations

import math

import pytest

from backend.judge import CORRECT, INCORRECT, NOT_ATTEMPTED, UNSURE, Judge
from backend.manager import QUESTION_TYPES, Manager
from backend.question import Question


def test_exact_match_and_empty_answers_need_no_model(tiny_chat_model):
    judge = Judge(tiny_chat_model)
    assert judge.grade("Where?", "It was Tulsa, Oklahoma.", "Tulsa").label == CORRECT
    assert judge.grade("Where?", "  ", "Tulsa").label == NOT_ATTEMPTED
    assert judge.evaluate_without_ground_truth("Where?", "", [{"title": "T", "text": "evidence"}]).label == NOT_ATTEMPTED


def test_semantic_grading_is_a_constrained_choice(tiny_chat_model):
    verdict = Judge(tiny_chat_model).grade("When was it founded?", "in the eighteen-forties", "1844")
    assert verdict.label in (CORRECT, INCORRECT)
    assert verdict.method == "llm-choice (logprob, calibrated)"
    assert "grader calibrated log-probabilities" in verdict.feedback[0]


def test_tiny_grader_never_calls_an_unrelated_answer_correct(tiny_chat_model):
    judge = Judge(tiny_chat_model, require_overlap=True)
    verdict = judge.grade("Where did they first perform?", "A short answer, followed by a question.", "Tulsa")
    assert (verdict.label, verdict.method) == (INCORRECT, "no-overlap")
    assert judge.grade("Which came first?", "Arthur's", "Arthur's Magazine").method.startswith("llm-choice")


def test_three_evaluators_and_an_arbiter_without_ground_truth(tiny_chat_model):
    verdict = Judge(tiny_chat_model).evaluate_without_ground_truth(
        "Where did Tinted Windows first perform?", "Tulsa",
        [{"title": "Tinted Windows (band)", "text": "Their first performance was in Tulsa."}],
    )
    assert verdict.label in (CORRECT, INCORRECT, UNSURE) and not verdict.verified
    assert verdict.evidence == ["Tinted Windows (band)"] and 0.5 <= verdict.confidence <= 1
    assert verdict.method == "evaluators+arbiter"
    assert [f.split(":")[0] for f in verdict.feedback][:3] == ["reasoning", "sourcing", "validity"]
    assert all((": pass " in f) or (": fail " in f) for f in verdict.feedback[:3])


def test_question_type_is_one_of_the_fixed_list(tiny_chat_model):
    manager = Manager(tiny_chat_model, store=None)
    assert manager.classify(Question.parse("Where was the band's first show?")) in QUESTION_TYPES


@pytest.mark.timeout(600)  # the first test of a session to use the real model prepares it from its wheels
@pytest.mark.slow
def test_smollm2_grader_scores_both_labels(smollm2_chat_model):
    judge = Judge(smollm2_chat_model)
    messages = [{"role": "user", "content": "Gold answer: Paris. Answer: Berlin. Is the answer correct? Reply correct or incorrect."}]
    choice = smollm2_chat_model.choose(messages, [CORRECT, INCORRECT])
    assert set(choice.logprobs) == {CORRECT, INCORRECT} and all(math.isfinite(v) for v in choice.logprobs.values())
    verdict = judge.evaluate_without_ground_truth("What is the capital of France?", "Paris",
                                                  [{"title": "France", "text": "Its capital is Paris."}])
    assert verdict.label in (CORRECT, INCORRECT, UNSURE) and len(verdict.feedback) >= 3
