"""A guided Executor turn follows a link (agent.follow_links): after the first search of an open
question, the page the results name whose text best matches the question is searched, once, without
a model call. Real wiki search (BM25), scripted model outputs."""

from __future__ import annotations

import time

from backend.events import Recovery, ToolCalled
from backend.executor import ExecutorSession
from backend.metering import RunMeter
from backend.question import Question

HARD_WAY = "Who starred in the 1991 American action comedy film The Hard Way and was featured on the roster of Rawkus Records?"


def run(model, tools, question, *, follow_links, max_turns=3):
    session = ExecutorSession(model, {"search": tools["search"]}, RunMeter(), "run", guided=True, follow_links=follow_links)
    asked = Question.parse(question)
    session.start(asked, [])
    return list(session.run(asked, max_turns=max_turns, deadline=time.monotonic() + 60))


def searched(events):
    return [e.arguments["query_list"][0] for e in events if isinstance(e, ToolCalled)]


def test_after_the_first_search_the_page_it_names_that_the_question_needs_is_searched(scripted_model_class, shared_tools):
    model = scripted_model_class("executor", ["The Hard Way (1991 film)", "", "Mos Def"], choices=["answer"])
    events = run(model, shared_tools, HARD_WAY, follow_links=True)
    assert searched(events) == ["The Hard Way (1991 film)", "Mos Def"]
    followed = [e for e in events if isinstance(e, Recovery) and e.action == "searching 'Mos Def'"]
    assert len(followed) == 1 and followed[0].routine
    assert followed[0].reason == "following a link: 'The Hard Way (1991 film)' names it, and the question's words point there"
    # The link cost no model call: the query turn, then the third turn's thought, choice and reading.
    assert len(model.prompts) == 4


def test_without_the_setting_the_model_chooses_what_follows_the_first_search(scripted_model_class, shared_tools):
    model = scripted_model_class("executor", ["The Hard Way (1991 film)", "", "Michael J. Fox"], choices=["answer"])
    events = run(model, shared_tools, HARD_WAY, follow_links=False)
    assert searched(events) == ["The Hard Way (1991 film)"]


def test_a_link_is_followed_once_and_never_for_a_closed_question(scripted_model_class, shared_tools):
    model = scripted_model_class("executor", ["The Hard Way (1991 film)", "", "James Woods"], choices=["search", "answer"])
    events = run(model, shared_tools, HARD_WAY, follow_links=True, max_turns=4)
    assert searched(events)[:2] == ["The Hard Way (1991 film)", "Mos Def"]
    assert sum(isinstance(e, Recovery) and e.action.startswith("searching '") and e.reason.startswith("following a link")
               for e in events) == 1
    # The same first search follows its link for an open question, not for a closed one (its options are searched instead).
    open_question = "Which band from Seattle besides Hammerbox was Carrie Akre known for?"
    model = scripted_model_class("executor", ["Carrie Akre", "", "Goodness"], choices=["answer"])
    assert searched(run(model, shared_tools, open_question, follow_links=True)) == ["Carrie Akre", "Goodness (band)"]
    closed = "Who is older, Carrie Akre or Shifty Shellshock?"
    model = scripted_model_class("executor", ["Carrie Akre", "", "Carrie Akre"], choices=["answer"])
    assert searched(run(model, shared_tools, closed, follow_links=True)) == ["Carrie Akre"]


def test_an_open_question_about_two_named_things_searches_each_instead_of_a_link(scripted_model_class, shared_tools):
    question = "What industry did both William Todd Field and Zoltan Korda work in?"
    model = scripted_model_class("executor", ["William Todd Field", "", "film"], choices=["answer"])
    events = run(model, shared_tools, question, follow_links=True)
    assert searched(events) == ["William Todd Field", "Zoltan Korda"]
    assert any(isinstance(e, Recovery) and e.action == "searching 'Zoltan Korda'" and e.routine for e in events)
    # A name the first query already looked up is not searched again: the pair is done, and no link is followed.
    model = scripted_model_class("executor", ["Zoltan Korda", "", "film"], choices=["answer"])
    assert searched(run(model, shared_tools, "Zoltan Korda and William Todd Field both worked in what industry?",
                        follow_links=True)) == ["Zoltan Korda", "William Todd Field"]


def test_the_pair_an_open_question_asks_about_is_read_from_its_names():
    assert Question.parse("Cranium and Twin Tin Bots are both what?").pair == ("Cranium", "Twin Tin Bots")
    assert Question.parse("what species of plants are Chamelaucium and Vanilla derived from?").pair == (
        "Chamelaucium", "Vanilla")
    assert Question.parse("Were both Peter Duffell and Fred Niblo actors?").pair == ()  # closed: yes or no
    assert Question.parse(HARD_WAY).pair == ()
