"""A larger local model's guided turns (Qwen on llama.cpp declares small=False): it drafts the answer
from its own conversation after each search and stops once the results state the draft; a draft the
results do not state, or one that only repeats the question's own entity, sends it searching on.
Real wiki search (BM25), scripted model outputs."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from backend.events import AnswerReady, ExecutorThought, Recovery, ToolCalled, ToolReturned
from backend.evidence import is_grounded
from backend.executor import ExecutorSession
from backend.prompts.executor import EXECUTOR_SYSTEM
from backend.metering import RunMeter
from backend.question import Question

QUESTION = "In what city did the band Tinted Windows first perform?"


@pytest.fixture
def larger_model_class(scripted_model_class):
    class LargerScriptedModel(scripted_model_class):
        traits = replace(scripted_model_class.traits, small=False, executor_turns=4)

    return LargerScriptedModel


def run(model, tools, question=QUESTION, max_turns=4):
    session = ExecutorSession(model, {"search": tools["search"]}, RunMeter(), "run", guided=True)
    session.start(Question.parse(question), [])
    return list(session.run(Question.parse(question), max_turns=max_turns, deadline=time.monotonic() + 60))


def session_passages(events):
    return [p for e in events if isinstance(e, ToolReturned) for p in e.passages]


def searched(events):
    return [e.arguments["query_list"][0] for e in events if isinstance(e, ToolCalled)]


def test_a_draft_the_results_state_ends_the_run_after_one_search(larger_model_class, shared_tools):
    model = larger_model_class("executor", ["Tinted Windows band", "Tulsa"])
    events = run(model, shared_tools)
    assert searched(events) == ["Tinted Windows band"]
    answer = next(e for e in events if isinstance(e, AnswerReady))
    assert answer.text == "Tulsa" and not answer.forced
    # The draft was read from the Executor's own conversation (its prompt cache), not a separate prompt.
    reader_prompt = model.prompts[-1]
    assert reader_prompt[0]["content"].startswith(EXECUTOR_SYSTEM.split("{")[0])
    assert "<tool_response>" in reader_prompt[-1]["content"]
    assert reader_prompt[-1]["content"].rstrip().endswith("Reply with the answer only (a few words from the results).")
    # What the reader saw is every passage of its conversation's search results.
    assert answer.read_from and answer.read_from == list(dict.fromkeys(p["title"] for p in session_passages(events)))
    assert all(title in reader_prompt[-1]["content"] for title in answer.read_from)


def test_an_ungrounded_draft_sends_the_executor_searching_on(larger_model_class, shared_tools):
    model = larger_model_class("executor", ["Tinted Windows band", "Atlantis", "Tinted Windows first performance", "Tulsa"])
    events = run(model, shared_tools)
    assert searched(events) == ["Tinted Windows band", "Tinted Windows first performance"]
    assert any(isinstance(e, ExecutorThought) and "'Atlantis' is not stated" in e.text for e in events)
    assert any(isinstance(e, Recovery) and "not grounded" in e.reason for e in events)
    assert next(e for e in events if isinstance(e, AnswerReady)).text == "Tulsa"


def test_a_draft_that_repeats_the_questions_entity_is_not_an_answer(larger_model_class, shared_tools):
    model = larger_model_class("executor", ["Tinted Windows", "Tinted Windows", "Tinted Windows band", "Tulsa"])
    events = run(model, shared_tools)
    assert len(searched(events)) == 2
    assert next(e for e in events if isinstance(e, AnswerReady)).text == "Tulsa"


def test_a_comparison_searches_both_sides_before_choosing(larger_model_class, shared_tools):
    question = "Who is older, Annie Morton or Terry Richardson?"
    model = larger_model_class("executor", ["Annie Morton", "Terry Richardson"], choices=["Terry Richardson"])
    events = run(model, shared_tools, question=question)
    assert searched(events) == ["Annie Morton", "Terry Richardson"]
    assert next(e for e in events if isinstance(e, AnswerReady)).text == "Terry Richardson"


def test_grounding_needs_the_answer_in_the_text_as_whole_words():
    passages = [{"title": "Tinted Windows (band)", "text": "The first performance by the band was in Tulsa, Oklahoma."}]
    assert is_grounded("Tulsa", QUESTION, passages)
    assert is_grounded("tulsa.", QUESTION, passages)
    assert is_grounded("Tulsa, 2009", QUESTION, passages) and is_grounded("Tulsa (Oklahoma)", QUESTION, passages)
    assert not is_grounded("Boston, Tulsa", QUESTION, passages)  # the core of the answer must be stated
    assert not is_grounded("Tuls", QUESTION, passages)  # part of a word
    assert not is_grounded("Tinted Windows", QUESTION, passages)  # the question's own entity
    assert not is_grounded("", QUESTION, passages)
    assert not is_grounded("Chicago", QUESTION, passages)


def test_reflection_is_shown_where_the_results_state_the_answer(larger_model_class, shared_tools):
    from backend.planner import Planner

    model = larger_model_class("executor", ["Tinted Windows band", "Tulsa"])
    session = ExecutorSession(model, {"search": shared_tools["search"]}, RunMeter(), "run", guided=True)
    session.start(Question.parse(QUESTION), [])
    list(session.run(Question.parse(QUESTION), max_turns=4, deadline=time.monotonic() + 60))
    support = session.answer_support(Question.parse(QUESTION))
    assert support.startswith("Tinted Windows (band): ") and "Tulsa" in support
    planner_model = larger_model_class("planner", choices=["yes"])  # yes: the research supports the answer
    reflection = Planner(planner_model).reflect(QUESTION, session.answer, session.trace_text(), support=support)
    assert not reflection.replan
    prompt = planner_model.prompts[-1][-1]["content"]
    assert f"Where the results state it (retrieved data): {support}" in prompt
    Planner(planner_model).reflect(QUESTION, "Chicago", session.trace_text(), support="")
    assert "The retrieved text does not state this answer." in planner_model.prompts[-1][-1]["content"]
    # yes/no: no sentence states "yes", so the reflection is shown what the results say about the question
    closed = session.answer_support(Question.parse("Was Tinted Windows formed in New York City?"))
    assert closed.startswith("Tinted Windows (") and "formed in New York City" in closed


def test_a_draft_repeating_a_question_word_is_taken_only_after_a_second_search(larger_model_class, shared_tools):
    question = "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?"
    model = larger_model_class("executor", ["Billy McFarland", "Fyre Festival", "Fyre Festival location", "Great Exuma"])
    events = run(model, shared_tools, question=question)
    assert searched(events) == ["Billy McFarland", "Fyre Festival location"]
    assert next(e for e in events if isinstance(e, AnswerReady)).text == "Great Exuma"


def test_a_draft_the_questions_own_image_states_ends_the_run_after_one_search(larger_model_class, shared_tools):
    """A draft that repeats a question word needs a second search, unless the text OCR read in the
    question's image states it: that is the person's own evidence, not a first hop's entity."""
    from backend.prompts.manager import image_text_passage

    question = "What tariff per tonne does the notice in this image state?"
    notice = image_text_passage("HARBOUR OF VELLMARK TARIFF 2025: 17 CROWNS PER TONNE")

    def asked(model, passages):
        session = ExecutorSession(model, {"search": shared_tools["search"]}, RunMeter(), "run", guided=True)
        session.start(Question.parse(question), [])
        session.passages.extend(passages)
        return list(session.run(Question.parse(question), max_turns=4, deadline=time.monotonic() + 60))

    events = asked(larger_model_class("executor", ["Vellmark tariff", "17 crowns per tonne"]), [notice])
    assert searched(events) == ["Vellmark tariff"]
    answer = next(e for e in events if isinstance(e, AnswerReady))
    assert answer.text == "17 crowns per tonne" and answer.sources[0]["title"] == notice["title"]
    # The same draft stated only by a search result still needs the second search.
    stated_by_a_result = dict(notice, title="Harbour of Vellmark", source="wiki")
    events = asked(larger_model_class("executor", ["Vellmark tariff", "17 crowns per tonne", "Vellmark harbour dues",
                                                   "17 crowns per tonne"]), [stated_by_a_result])
    assert len(searched(events)) == 2


def test_what_the_image_text_leaves_out_is_searched_by_name_before_any_written_query(larger_model_class,
                                                                                      shared_tools):
    """A page about one of a comparison's two people: the other is searched by name, with no query
    written by the model; a page naming the region a question only describes: the region is searched.
    Without the image's text, the model's own query goes first."""
    from backend.prompts.manager import image_text_passage

    def asked(question, page, heading, outputs):
        session = ExecutorSession(larger_model_class("executor", outputs), {"search": shared_tools["search"]},
                                  RunMeter(), "run", guided=True)
        session.start(Question.parse(question), [])
        if page:
            session.passages.append(image_text_passage(page))
            session.image_heading = heading
        return list(session.run(Question.parse(question), max_turns=4, deadline=time.monotonic() + 60))

    born_first = "Who was born first, Marino Girolami or Daniel Myrick?"
    page = "Daniel Myrick\n\nDaniel Myrick (born September 3, 1963) is an American film director."
    events = asked(born_first, page, "Daniel Myrick", ["Daniel Myrick birth", "Marino Girolami"])
    assert searched(events)[0] == "Marino Girolami"
    assert any(isinstance(e, Recovery) and e.reason == "the image's text does not cover this"
               and e.action == "searching 'Marino Girolami'" for e in events)
    assert searched(asked(born_first, "", "", ["Daniel Myrick birth", "Marino Girolami"]))[0] == "Daniel Myrick birth"

    region = "The southernmost administrative region of Denmark is well-known for creating what products?"
    page = "Region Zealand\n\nRegion Zealand is the southernmost administrative region of Denmark."
    events = asked(region, page, "Region Zealand", ["Danish products", "beer"])
    assert searched(events)[0] == "Region Zealand"


def test_the_whole_image_text_is_in_the_conversation_the_answer_is_read_from(larger_model_class, shared_tools):
    """The caption the Planner reads holds the image text's first 400 characters; the Executor's
    conversation holds the whole page, so a fact far down it is read, and the answer says so."""
    from backend.prompts.manager import image_text_passage

    question = "Which record label employs Nate Albert as an executive?"
    page = ("Nate Albert\n\nNate Albert (born 1970) is an American music executive, songwriter, producer and "
            "guitar player. " + "He played in several bands across the 1990s and toured widely. " * 8 +
            "He is the Executive Vice President of A&R at Capitol Records.")
    assert page.index("Capitol Records") > 400
    model = larger_model_class("executor", ["Capitol Records"])
    session = ExecutorSession(model, {"search": shared_tools["search"]}, RunMeter(), "run", guided=True)
    session.passages.append(image_text_passage(page))
    session.start(Question.parse(question), [])
    events = list(session.run(Question.parse(question), max_turns=4, deadline=time.monotonic() + 60))
    assert "Executive Vice President of A&R at Capitol Records" in model.prompts[0][1]["content"]
    answer = next(e for e in events if isinstance(e, AnswerReady))
    assert answer.read_from[0] == "Text in the question's image (OCR)"
