"""Follow-up questions (backend.follow_up): read with the thread's last question and answer into a
standalone question, by rule, with one constrained model call only where the rule leaves a choice; the
thread's earlier passages put in the Executor's session and answered from before any new search. The
real loop, store and search index; scripted models say what a model would write."""

from __future__ import annotations

import pytest

from backend.agent import ResearchAgent, RunRequest
from backend.events import AnswerReady, MemoryStored, Recovery, RunFailed, RunStarted, ToolCalled
from backend.follow_up import FollowUp, Thread, ThreadTurn, rewrite
from backend.runlog import RunLog
from memory_db import MemoryStore
from tests.backend.conftest import scripted_config
from tests.training.hops_example import DECOMPOSITION, FESTIVAL


def after(question: str, answer: str) -> Thread:
    return Thread("t1", [ThreadTurn("t1", question, question, answer)])


@pytest.mark.parametrize("question, answer, asked, standalone", [
    ("Who directed Jaws?", "Steven Spielberg", "When was she born?", "When was Steven Spielberg born?"),
    ("Who directed Jaws?", "Steven Spielberg", "What is his best-known film?", "What is Steven Spielberg's best-known film?"),
    # "it" after a question asking for a person is what that question asked about
    ("Who directed Jaws?", "Steven Spielberg", "When was it released?", "When was Jaws released?"),
    ("Who directed Jaws?", "Steven Spielberg", "Who wrote the score of this film?", "Who wrote the score of Jaws?"),
    ("Which music festival was Billy McFarland charged with wire fraud for?", "Fyre Festival",
     "Where was it supposed to take place?", "Where was Fyre Festival supposed to take place?"),
    ("Which music festival was Billy McFarland charged with wire fraud for?", "Fyre Festival",
     "Where was he born?", "Where was Billy McFarland born?"),
    ("Where was Barack Obama born?", "Honolulu", "What is the population there?", "What is the population in Honolulu?"),
    ("Which band recorded Abbey Road?", "The Beatles", "When did they split up?", "When did The Beatles split up?"),
    ("Who married Marie Curie?", "Pierre Curie", "Who gave her the prize?", "Who gave Pierre Curie the prize?"),
    # nothing points back: the question stands as typed; a capitalised "It" inside a title is no pronoun
    ("Who directed Jaws?", "Steven Spielberg", "When was Steven Spielberg born?", "When was Steven Spielberg born?"),
    ("Who directed Jaws?", "Steven Spielberg", "Who sang It Must Have Been Love?", "Who sang It Must Have Been Love?"),
    # a yes or no is nothing a word can point back to: "it" is what the question asked about
    ("Is Jaws a horror film?", "yes", "Who directed it?", "Who directed Jaws?"),
])
def test_a_follow_up_is_made_standalone_by_rule_without_a_model(question, answer, asked, standalone):
    made = rewrite(asked, after(question, answer), model=None)
    assert made.question == standalone and not made.model_called
    assert made.how.endswith(".")


def test_where_the_rule_leaves_a_choice_one_constrained_call_makes_it(scripted_model_class):
    # "What did Ada Lovelace do?" names no kind of answer: "it" may be the answer or what she is.
    model = scripted_model_class("planner", choices=["Ada Lovelace"])
    made = rewrite("When was it published?", after("What did Ada Lovelace do?", "a program"), model)
    assert made.model_called and made.question == "When was Ada Lovelace published?"
    assert len(model.prompts) == 1 and 'what does "it" refer to' in model.prompts[0][-1]["content"]
    assert "The model chose" in made.how


@pytest.fixture
def agent(tmp_path, shared_tools, embedder, scripted_model_class):
    config = scripted_config(tmp_path, plan_shape="subquestions", min_memory_similarity=-1.0)
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)

    def build(planner_outputs, reader_outputs, choices=()):
        models = {"planner": scripted_model_class("planner", planner_outputs, choices),
                  "executor": scripted_model_class("executor", reader_outputs),
                  "judge": scripted_model_class("judge"), "manager": scripted_model_class("manager")}
        return ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))

    build.store = store
    yield build
    store.close()


def first_run(agent) -> str:
    events = list(agent([DECOMPOSITION], ["Fyre Festival", "Great Exuma"]).run(RunRequest(FESTIVAL, namespace="alice")))
    assert [e for e in events if isinstance(e, AnswerReady)][-1].text == "Great Exuma"
    return events[0].run_id


def test_a_follow_up_is_answered_from_the_passages_its_thread_found(agent):
    first = first_run(agent)
    research = agent([], ["Fyre Festival"])
    made = research.read_follow_up("Which festival was he charged with wire fraud for?", "alice", first)
    assert made.question == "Which festival was Billy McFarland charged with wire fraud for?"
    events = list(research.run(RunRequest(made.question, namespace="alice", follow_up=FollowUp(
        first, "Which festival was he charged with wire fraud for?", made.how))))
    started = events[0]
    assert isinstance(started, RunStarted) and started.question == made.question
    assert started.follow_up["thread"] == first and started.follow_up["follows"] == first
    assert started.follow_up["asked"] == "Which festival was he charged with wire fraud for?"
    assert started.follow_up["reused"]  # the thread's passages, by title
    assert not any(isinstance(e, ToolCalled) for e in events)  # nothing searched again
    assert any(isinstance(e, Recovery) and "the thread found before states the answer" in e.reason for e in events)
    answer = [e for e in events if isinstance(e, AnswerReady)][-1]
    assert answer.text == "Fyre Festival" and answer.sources  # cited, as any answer
    reader_saw = research.models["executor"].prompts[0][-1]["content"]
    assert "Billy McFarland" in reader_saw and "Fyre Festival" in reader_saw  # the earlier passages, read
    stored = agent.store.get(next(e for e in events if isinstance(e, MemoryStored)).memory_id, namespace="alice")
    assert stored.question == made.question  # its own memory, of the standalone question
    assert stored.provenance["follow_up"]["asked"] == "Which festival was he charged with wire fraud for?"

    # A follow-up of the follow-up belongs to the same thread and reads both runs' passages.
    second = events[0].run_id
    thread = research.thread("alice", second)
    assert thread.id == first and [t.run_id for t in thread.turns] == [first, second]
    assert thread.turns[1].asked == "Which festival was he charged with wire fraud for?"


def test_a_follow_up_the_earlier_passages_do_not_answer_is_searched_again(agent):
    first = first_run(agent)
    # The reader's first reading (from the thread's passages) is stated nowhere: the question is researched.
    research = agent(["1. Where was Billy McFarland born?"], ["Lisbon", "Short Hills", "Short Hills"])
    events = list(research.run(RunRequest("Where was Billy McFarland born?", namespace="alice",
                                          follow_up=FollowUp(first, "Where was he born?"))))
    assert any(isinstance(e, Recovery) and "no passage the thread found before states an answer" in e.reason
               for e in events)
    assert any(isinstance(e, ToolCalled) for e in events)


def test_a_follow_up_of_a_run_that_is_not_there_says_what_to_do(agent):
    research = agent([], [])
    events = list(research.run(RunRequest("When was she born?", namespace="alice", follow_up=FollowUp("nope", "x"))))
    assert isinstance(events[0], RunFailed) and "No run nope in your history to follow up" in events[0].message
