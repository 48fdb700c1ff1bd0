"""One parsed question (backend.question): what each parser reads of a question, read once, and an
episode that parses its question once and hands that value to every role, tool and judge."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from backend import answer_kind, evidence, hops
from backend.agent import RunRequest
from backend.events import RunFinished, VerdictReady
from backend.hops import Hop, hops_from
from backend.question import Question

QUESTIONS = [
    "Which magazine was started first, Arthur's Magazine or First for Women?",
    "Were both Peter Duffell and Fred Niblo actors?",
    "what species of plants are Chamelaucium and Vanilla derived from?",
    "In which country was the director of the film Jaws born?",
    "In what year was the drummer from the album \"Angel of Retribution\" born?",
    "Which U.S. state is the Barton Mine in?",
    "How many views do the two channels have?",
    "Is it true, yes or no?",
    "",
]


@pytest.mark.parametrize("text", QUESTIONS)
def test_a_question_holds_what_each_parser_reads_of_it(text):
    question = Question.parse(text, image_text="HARBOUR OF VELLMARK")
    assert question.text == text and question.image_text == "HARBOUR OF VELLMARK"
    assert list(question.choices) == evidence.choice_options(text)
    assert list(question.options) == evidence.closed_options(text)
    assert question.closed == bool(evidence.closed_options(text))
    assert question.yes_no == evidence.is_yes_no_question(text)
    assert question.asks_yes_or_no == (evidence.closed_options(text) == ["yes", "no"])
    assert question.asks_for == hops.asked_kind(text)
    assert question.asks_when == hops.asks_for_time(text)
    assert list(question.names) == evidence.named_phrases(text)
    assert list(question.pair) == ([] if evidence.closed_options(text) else evidence.named_pair(evidence.named_phrases(text)))
    assert question == Question.parse(text, image_text="HARBOUR OF VELLMARK")  # a value: equal, hashable
    assert hash(question) == hash(Question.parse(text, image_text="HARBOUR OF VELLMARK"))


def test_the_kind_asked_is_read_from_the_parsed_question():
    assert Question.parse("In which country was the director of the film Jaws born?").kind == answer_kind.AnswerKind("country")
    assert Question.parse("Which U.S. state is the Barton Mine in?").kind == answer_kind.AnswerKind("state")  # "U.S." read as "US"
    assert Question.parse("Is Paris or Lyon bigger?").kind == answer_kind.AnswerKind("one of the options", ("Paris", "Lyon"))
    assert Question.parse("What is it?").kind is None


def test_a_hop_parses_each_wording_once_and_one_that_is_the_question_keeps_its_parse():
    question = Question.parse("Were both Peter Duffell and Fred Niblo actors?")
    first, second = hops_from([question.text, "When was #1 born?"], question)
    assert first.asked is question
    assert second.asked is second.asked and second.asked.text == "When was #1 born?"
    second.question = "When was Fred Niblo born?"
    assert second.asked.text == "When was Fred Niblo born?" and second.asked.asks_when
    assert "_asked" not in second.to_dict() and second.to_dict()["question"] == "When was Fred Niblo born?"
    assert Hop(1, "x", question="y").to_dict() == {"number": 1, "template": "x", "question": "y", "answer": "",
                                                   "sentence": "", "queries": []}


_PARSERS = {f.__code__: f.__name__ for f in (evidence.closed_options, evidence.choice_options, evidence.is_yes_no_question,
                                             evidence.named_phrases, hops.asked_kind)}
_PARSING = set(_PARSERS) | {Question.__post_init__.__code__}


def _parses_of(text: str, run) -> tuple[int, list[str]]:
    """(how often a Question of `text` was made, the parser calls on `text` made anywhere but in
    making one) while `run()` runs; each call is seen where it happens, whatever name it was imported by."""
    made, elsewhere = 0, []

    def profile(frame, event, arg):
        nonlocal made
        if event != "call":
            return
        code = frame.f_code
        if code is Question.__post_init__.__code__ and frame.f_locals["self"].text == text:
            made += 1
        elif code in _PARSERS and next(iter(frame.f_locals.values()), None) == text and frame.f_back.f_code not in _PARSING:
            caller = frame.f_back.f_code
            elsewhere.append(f"{_PARSERS[code]} from {Path(caller.co_filename).name}:{caller.co_name}")

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return made, elsewhere


QUESTION = 'The band who released the debut album "Tinted Windows" had their first performance in what city?'
CLOSED = "Were both Peter Duffell and Fred Niblo actors?"


@pytest.mark.timeout(900)  # two whole runs on the tiny model, every call traced
@pytest.mark.parametrize("question,gold,plan_shape", [(QUESTION, "Tulsa", "subquestions"), (CLOSED, None, "steps")])
def test_an_episode_parses_its_question_once(tmp_path, tiny_model_dir, build_agent, question, gold, plan_shape):
    """On the tiny model, the whole loop (memories, plan, Executor, reader, hops, Judge with and without
    ground truth, Manager) parses the question once: no role parses its text again."""
    agent = build_agent(tmp_path, tiny_model_dir, plan_shape=plan_shape)
    events = []
    made, elsewhere = _parses_of(question, lambda: events.extend(agent.run(RunRequest(question, ground_truth=gold))))
    assert isinstance(events[-1], RunFinished) and any(isinstance(e, VerdictReady) for e in events)
    assert made == 1
    assert elsewhere == []
