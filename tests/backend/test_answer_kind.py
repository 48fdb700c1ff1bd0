"""The kind of answer a question asks for (backend.answer_kind): an answer of another kind is not given
as the answer; it is researched once more and read again, and when nothing of the kind asked is found
the answer says what was found. The Judge counts a kind mismatch against an answer without asking a
model, and gives an answer no retrieved sentence states no high confidence."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from backend.agent import ResearchAgent, RunRequest
from backend.answer_kind import kind_problem, says_not_of_kind, span_of_kind
from backend.events import AnswerReady, Recovery, ToolCalled, VerdictReady
from backend.judge import ANSWER_KIND, INCORRECT, NOT_ATTEMPTED, UNSTATED_CONFIDENCE, UNSURE, Judge
from backend.llm.base import Choice
from backend.question import Question
from backend.runlog import RunLog
from memory_db import MemoryStore
from tests.backend.conftest import scripted_config
from tests.counting_model import Counting

JAWS = "In which country was the director of the film Jaws born?"


@pytest.mark.parametrize("question, answer, problem", [
    (JAWS, "Pennsylvania", "found a state, Pennsylvania; not a country"),
    ("In which country was the director of the film Jaws 2 born?", "California", "found a state, California; not a country"),
    (JAWS, "United States", None),
    (JAWS, "Cincinnati, Ohio, US", None),  # holds a country
    ("Georgia borders which country?", "Georgia", None),  # a country and a state: no mistake
    ("What is the capital of the country whose flag this is?", "Moldova", "found a country, Moldova; not a city"),
    ("What is the capital of France?", "Paris", None),
    ("What city hosts the summit?", "New York", None),  # a state's name and a city's
    ("Which U.S. state is the Barton Mine in?", "Canada", "found a country, Canada; not a state"),
    ("Which U.S. state is the Barton Mine in?", "Ontario", None),  # another country's province: the check cannot tell
    ("When was Steven Spielberg born?", "Cincinnati", "found an answer, Cincinnati; not a date"),
    ("When was Steven Spielberg born?", "December 18, 1946", None),
    ("In what year did Jaws open?", "the 1970s", None),
    ("How many films did Spielberg direct?", "many", "found an answer, many; not a number"),
    ("How many films did Spielberg direct?", "thirty-two", None),
    ("How long is the Nile?", "6,650 km", None),
    ("Who directed Jaws?", "France", "found a country, France; not a person"),
    ("Who directed Jaws?", "Steven Spielberg", None),
    ("Where was Spielberg born?", "1946", "found a number, 1946; not a place"),
    ("What is the nationality of Steven Spielberg?", "American", None),
    ("What is the nationality of Steven Spielberg?", "Ohio", "found a state, Ohio; not a nationality"),
    ("What country of origin do Jaws and Alien have in common?", "American", None),
    ("Which film came out first, Jaws or Alien?", "Jaws", None),
    ("Who was born first, Grigory Margulis or Leonid Levin?", "Gregori Aleksandrovich Margulis", None),
    ("Which film came out first, Jaws or Alien?", "Star Wars", "found an answer, Star Wars; not one of Jaws or Alien"),
    ("What did Spielberg film in 1975?", "Pennsylvania", None),  # a bare "what": the words do not say
])
def test_an_answer_is_checked_against_the_kind_the_question_asks_for(question, answer, problem):
    assert kind_problem(Question.parse(question), answer) == problem
    if problem:
        assert says_not_of_kind(problem)


def test_a_name_of_the_kind_asked_is_found_beside_the_wrong_one():
    kind = Question.parse(JAWS).kind
    assert span_of_kind(kind, "Pennsylvania is a state located in the Northeastern regions of the United States.") \
        == "United States"
    assert span_of_kind(kind, "Pennsylvania borders Delaware and Ohio.") is None
    assert span_of_kind(Question.parse("When was he born?").kind, "He was born in 1946 in Ohio.") is None  # only names the gazetteer knows


class Unasked:
    """A model that must not be called."""

    name, supports_images = "unasked", False

    def choose(self, messages, options, **kwargs):
        raise AssertionError("the Judge asked a model about an answer the rules decide")


class Arbiter:
    """Every evaluator passes and the arbiter says correct at 0.95."""

    name, supports_images = "arbiter", False

    def choose(self, messages, options, **kwargs):
        label = "yes" if "yes" in options else "correct"
        other = next(o for o in options if o != label)
        return Choice(label=label, logprobs={label: 0.0, other: -2.944}, method="scripted")  # p = 0.95


def test_the_judge_counts_a_kind_mismatch_against_the_answer_without_a_model():
    passages = [{"title": "Pennsylvania", "text": "Pennsylvania is a state of the United States."}]
    verdict = Judge(Unasked()).evaluate_without_ground_truth(JAWS, "Pennsylvania", passages)
    assert (verdict.label, verdict.method, verdict.verified) == (INCORRECT, ANSWER_KIND, False)
    assert "found a state, Pennsylvania; not a country" in verdict.feedback[0]
    said = "found a state, Pennsylvania; not a country"
    assert Judge(Unasked()).grade(JAWS, said, "United States").label == NOT_ATTEMPTED
    assert Judge(Unasked()).evaluate_without_ground_truth(JAWS, said, passages).label == NOT_ATTEMPTED


def test_an_answer_no_retrieved_sentence_states_gets_no_high_confidence():
    question = "Which country's flag is shown in the image?"
    judge = Judge(Arbiter())
    unstated = judge.evaluate_without_ground_truth(question, "Moldova", [{"title": "Flag", "text": "A tricolour flag."}])
    assert (unstated.label, unstated.leaning) == (UNSURE, "correct")
    assert unstated.confidence == UNSTATED_CONFIDENCE and "capped" in unstated.feedback[-1]
    stated = judge.evaluate_without_ground_truth(question, "Moldova",
                                                 [{"title": "Flag of Moldova", "text": "The flag of Moldova is a tricolour."}])
    assert stated.confidence == pytest.approx(0.95, abs=0.01)


def call(query: str) -> str:
    return f'<think>look it up</think><tool_call>{json.dumps({"name": "search", "arguments": {"query_list": [query]}})}</tool_call>'


def answer(text: str) -> str:
    return f"<think>found it</think><answer>{text}</answer>"


def run_alone(tmp_path, shared_tools, embedder, scripted_model_class, question, executor_outputs, gold=None):
    """The Executor alone (method none) on free-form scripted turns; returns the run's events and the Executor."""
    config = scripted_config(tmp_path, max_turns=3, guided_actions="off", read_by_quote=False)
    models = {role: scripted_model_class(role) for role in ("planner", "judge", "manager")}
    models["executor"] = Counting(scripted_model_class("executor", executor_outputs))
    for model in (*models.values(), models["executor"].model):
        model.traits = replace(model.traits, small=False, guided_turns=False)
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    try:
        agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
        return list(agent.run(RunRequest(question=question, ground_truth=gold, method="none"))), models["executor"]
    finally:
        store.close()


def test_a_state_for_a_country_is_researched_once_more_and_the_country_beside_it_is_the_answer(
        tmp_path, shared_tools, embedder, scripted_model_class):
    events, executor = run_alone(tmp_path, shared_tools, embedder, scripted_model_class, JAWS,
                                 [call("Jaws film director"), answer("Pennsylvania"), "Pennsylvania"], gold="United States")
    searched = [e.arguments["query_list"][0] for e in events if isinstance(e, ToolCalled)]
    assert searched == ["Jaws film director", "Pennsylvania"]  # its page names the country it is in
    answers = [e.text for e in events if isinstance(e, AnswerReady)]
    assert answers == ["Pennsylvania", "United States"]
    final = [e for e in events if isinstance(e, AnswerReady)][-1]
    assert final.sources and "United States" in final.sources[0]["sentence"]
    reasons = [e.reason for e in events if isinstance(e, Recovery)]
    assert "'Pennsylvania' is a state; the question asks for a country" in reasons
    verdict = next(e for e in events if isinstance(e, VerdictReady))
    assert verdict.label == "correct"
    assert executor.calls == 3  # two turns and one reading again


def test_when_nothing_of_the_kind_asked_is_found_the_answer_says_so(tmp_path, shared_tools, embedder,
                                                                      scripted_model_class):
    question = "When was the director of the film Jaws born?"
    events, _ = run_alone(tmp_path, shared_tools, embedder, scripted_model_class, question,
                          [call("Jaws film director"), answer("Cincinnati"), "Cincinnati"])
    final = [e for e in events if isinstance(e, AnswerReady)][-1]
    assert final.text == "found an answer, Cincinnati; not a date"
    verdict = next(e for e in events if isinstance(e, VerdictReady))
    assert verdict.label == NOT_ATTEMPTED  # no model decides that this is no date
