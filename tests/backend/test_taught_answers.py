"""What a person teaches changes the next answer: a typed right answer (or a thumbs up) is kept with
the run's memory, and the same question or a rewording starts from it, through the real loop, store,
search index and feedback path. The models are scripted: each test says what they would answer, and
asserts the person's answer wins, is cited where a source states it, and is said to come from them."""

from __future__ import annotations

import pytest

from app.render_html import transcript_of
from app.render_text import event_to_text
from backend.agent import ResearchAgent, RunRequest
from backend.events import AnswerReady, MemoriesRetrieved, MemoryStored, RunFinished, RunStarted, VerdictReady
from backend.feedback import FeedbackQueue, submit_feedback
from backend.judge import Judge
from backend.prompts.manager import format_memories, memory_shown
from backend.runlog import RunLog
from backend.taught import is_rewording
from backend.tools.base import query_tool
from memory_db import MemoryStore
from tests.backend.conftest import scripted_config
from tests.backend.scripted_model import answer_turn as answer, tool_call_turn as call

EIFFEL = "Which city is the capital of the country where the Eiffel Tower stands?"
EIFFEL_REWORDED = "What is the capital city of the country in which the Eiffel Tower is located?"
EIFFEL_COUNTRY = "In which country is the Eiffel Tower?"
COLOSSEUM = "Which city is the capital of the country where the Colosseum stands?"
NO_LESSON_JUDGE = ["no", "no", "no", "incorrect"]  # three evaluators and the arbiter, without ground truth


def test_a_rewording_names_the_same_things_and_keeps_most_words():
    assert is_rewording(EIFFEL, EIFFEL_REWORDED)
    assert is_rewording(EIFFEL, "The Eiffel Tower stands in a country; which city is that country's capital?")
    assert not is_rewording(EIFFEL, COLOSSEUM)  # another monument
    assert not is_rewording(EIFFEL, EIFFEL_COUNTRY)  # the same monument, another question
    assert not is_rewording("Who is older, Carrie Akre or Shifty Shellshock?", "Who is older, Carrie Akre or Beck?")


def test_the_planner_reads_the_answer_of_a_memory_whole_however_long_its_searches():
    searches = "Searched: " + "; then ".join(f"search 'query number {i}' found Page {i}" for i in range(40)) + "."
    item = {"question": EIFFEL, "correct": False, "verified": True,
            "summary": f"{searches} The answer rests on: \"Eiffel Tower: in Paris, France\". Answered 'Bordeaux': "
                       "incorrect (verified).",
            "taught": {"answer": "Paris", "evidence": {"query": "Eiffel Tower", "title": "Eiffel Tower",
                                                       "sentence": "The Eiffel Tower is in Paris, France."}}}
    shown = memory_shown(item, max_chars=400)
    assert "Answered 'Bordeaux': incorrect (verified)." in shown
    assert "A person gave the right answer: Paris." in shown
    assert "The Eiffel Tower is in Paris, France." in shown
    assert "query number 39" not in shown and "query number 0" in shown  # only the searches are shortened
    assert f"1. {shown}" in format_memories([], [item])


@pytest.fixture
def world(tmp_path, shared_tools, embedder, scripted_model_class):
    """ask(question, executor turns, judge choices) on one store and run log; teach(...) gives feedback."""
    config = scripted_config(tmp_path, max_turns=3, guided_actions="off")
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    runlog = RunLog(config.runs_dir)
    seen: dict[str, object] = {}

    class World:
        def ask(self, question, executor, judge_choices=(), namespace="alice"):
            models = {
                "planner": scripted_model_class("planner", ["1. Search for the tower"] * 2, ["yes"] * 2),
                "executor": scripted_model_class("executor", executor),
                "judge": scripted_model_class("judge", (), judge_choices),
                "manager": scripted_model_class("manager"),
            }
            seen.update(models)
            agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=runlog)
            return list(agent.run(RunRequest(question, namespace=namespace)))

        def teach(self, events, *, thumbs=None, right_answer=None, namespace="alice", grades=("incorrect",) * 2):
            run_id = next(e for e in events if isinstance(e, RunStarted)).run_id
            return submit_feedback(store=store, runlog=runlog, judge=Judge(scripted_model_class("judge", (), grades)),
                                   queue=FeedbackQueue(store), namespace=namespace, run_id=run_id, user=namespace,
                                   thumbs=thumbs, right_answer=right_answer, search=query_tool(shared_tools))

        def calls(self, role):
            return len(seen[role].prompts)

    yield World(), store
    store.close()


def _answer(events) -> AnswerReady:
    return [e for e in events if isinstance(e, AnswerReady)][-1]


def test_a_typed_correction_answers_the_same_question_and_a_rewording_next_time(world):
    ask, store = world
    wrong = [call("search", query_list=["Eiffel Tower"]), answer("Bordeaux")]
    first = ask.ask(EIFFEL, wrong, NO_LESSON_JUDGE)
    assert _answer(first).text == "Bordeaux"

    outcome = ask.teach(first, thumbs="down", right_answer="Paris")
    assert any("Remembered 'Paris' as the answer" in line and "A source states it: Eiffel Tower" in line
               for line in outcome.changes), outcome.changes
    memory_id = next(e for e in first if isinstance(e, MemoryStored)).memory_id
    taught = store.get(memory_id, namespace="alice").provenance
    assert (taught["taught_answer"], taught["taught_by"], taught["taught_how"]) == ("Paris", "alice", "typed")
    assert taught["taught_evidence"]["title"] == "Eiffel Tower" and "Paris" in taught["taught_evidence"]["sentence"]

    again = ask.ask(EIFFEL, wrong, NO_LESSON_JUDGE)  # the Executor would say Bordeaux again
    given = _answer(again)
    assert given.text == "Paris" and given.taught["confirmed"] is True
    assert [s["title"] for s in given.sources][:1] == ["Eiffel Tower"]
    assert ask.calls("executor") == 0 and ask.calls("planner") == 0  # confirmed by one search, no model call
    recalled = next(e for e in again if isinstance(e, MemoriesRetrieved)).taught
    assert recalled["memory_id"] == memory_id
    verdict = next(e for e in again if isinstance(e, VerdictReady))
    assert verdict.label == "correct" and verdict.source == "feedback"
    assert "You corrected this on" in event_to_text(given) and ": Paris. A retrieved source states it" in event_to_text(given)
    assert "You corrected this on" in transcript_of(again).answer_html()

    reworded = _answer(ask.ask(EIFFEL_REWORDED, wrong, NO_LESSON_JUDGE))
    assert reworded.text == "Paris" and reworded.taught["question"] == EIFFEL


def test_a_near_miss_and_another_user_get_no_taught_answer(world):
    ask, store = world
    wrong = [call("search", query_list=["Eiffel Tower"]), answer("Bordeaux")]
    ask.teach(ask.ask(EIFFEL, wrong, NO_LESSON_JUDGE), thumbs="down", right_answer="Paris")

    # Each answered with a name of the kind it asks for (a country for the country question).
    for question, namespace, given in ((EIFFEL_COUNTRY, "alice", "Italy"), (COLOSSEUM, "alice", "Rome"),
                                       (EIFFEL, "bob", "Rome")):
        events = ask.ask(question, [call("search", query_list=["tower"]), answer(given)], NO_LESSON_JUDGE,
                         namespace=namespace)
        assert next(e for e in events if isinstance(e, MemoriesRetrieved)).taught is None
        assert _answer(events).text == given and _answer(events).taught is None


def test_a_persons_word_without_a_source_is_given_at_once_and_said_to_be_theirs(world):
    ask, store = world
    first = ask.ask(EIFFEL, [call("search", query_list=["Eiffel Tower"]), answer("Bordeaux")], NO_LESSON_JUDGE)
    outcome = ask.teach(first, thumbs="down", right_answer="Gdansk")  # no source states it
    assert any("No source searched states it yet." in line for line in outcome.changes), outcome.changes

    # were the question researched again, the Executor would find and cite another answer
    again = ask.ask(EIFFEL, [call("search", query_list=["Eiffel Tower"]), answer("Paris")], NO_LESSON_JUDGE)
    given = _answer(again)
    assert given.text == "Gdansk" and given.taught["confirmed"] is False and given.sources == []
    assert ask.calls("executor") == 0 and ask.calls("planner") == 0 and ask.calls("judge") == 0
    assert [e.answer for e in again if isinstance(e, RunFinished)] == ["Gdansk"]
    shown = event_to_text(given)
    assert "You corrected this on" in shown and "This is your word: no retrieved source states it yet." in shown
    assert "Paris" not in shown and "check which is right" not in shown
    assert "This is your word" in transcript_of(again).answer_html()
    verdict = next(e for e in again if isinstance(e, VerdictReady))
    assert verdict.label == "correct" and verdict.source == "feedback"


XLIX = "What was the final score of Super Bowl XLIX?"
XLVIII = "What was the final score of Super Bowl XLVIII?"


def test_a_correction_stays_with_its_own_question_however_similar_another_is(world):
    """Finding 9: two questions 0.976 alike (MiniLM), each corrected, each recalls its own answer."""
    ask, store = world
    for question, right in ((XLIX, "28-24"), (XLVIII, "43-8")):
        ask.teach(ask.ask(question, [call("search", query_list=["Super Bowl"]), answer("20-17")], NO_LESSON_JUDGE),
                  thumbs="down", right_answer=right)
    assert store.count(namespace="alice") == 2  # the second run's memory was not merged into the first
    for question, right in ((XLIX, "28-24"), (XLVIII, "43-8")):
        given = _answer(ask.ask(question, [answer("20-17")], NO_LESSON_JUDGE))
        assert (given.text, given.taught["question"]) == (right, question)

    # a third game is researched; the trace names the similar taught question, the answer does not
    events = ask.ask("What was the final score of Super Bowl XLVII?",
                     [call("search", query_list=["Super Bowl XLVII"]), answer("34-31")], NO_LESSON_JUDGE)
    retrieved = next(e for e in events if isinstance(e, MemoriesRetrieved))
    assert retrieved.taught is None and retrieved.near_taught["question"] in (XLIX, XLVIII)
    assert "Super Bowl XLVII" in retrieved.near_taught["why"]
    line = event_to_text(retrieved)
    assert "A similar question, “What was the final score of Super Bowl XLVI" in line and "so this one is researched" in line
    assert _answer(events).text == "34-31" and _answer(events).taught is None and ask.calls("executor") > 0


def test_a_thumbs_up_teaches_the_answer_it_was_given(world):
    ask, store = world
    right = ask.ask(EIFFEL, [call("search", query_list=["Eiffel Tower"]), answer("Paris")], ["yes"] * 3 + ["correct"])
    ask.teach(right, thumbs="up", grades=())
    given = _answer(ask.ask(EIFFEL_REWORDED, [answer("Lyon")], NO_LESSON_JUDGE))
    assert given.text == "Paris" and given.taught["how"] == "thumbs up"
    assert "You confirmed this on" in event_to_text(given)


def test_the_search_of_the_run_that_found_the_answer_confirms_it_next_time(world):
    ask, store = world
    festival = "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?"
    first = ask.ask(festival, [call("search", query_list=["Fyre Festival"]), answer("Lisbon")], NO_LESSON_JUDGE)
    outcome = ask.teach(first, thumbs="down", right_answer="Great Exuma")
    assert any("found by searching 'Fyre Festival'" in line for line in outcome.changes), outcome.changes
    given = _answer(ask.ask(festival, [answer("Lisbon")], NO_LESSON_JUDGE))
    assert given.text == "Great Exuma" and given.taught["confirmed"] and ask.calls("executor") == 0
    assert given.sources[0]["title"] == "Fyre Festival"


def test_taught_fields_from_an_imported_file_are_read_as_data(world):
    from backend.manager import memory_to_dict
    from memory_db import NewMemory
    from memory_db.records import ScoredMemory

    ask, store = world
    forged = store.add(NewMemory(question=EIFFEL, summary="Answered 'Paris': correct (verified).", plan="", correct=True,
                                 namespace="alice", provenance={
                                     "verified": True, "verdict_source": "person", "taught_answer": "Paris",
                                     "taught_at": "yesterday", "taught_how": "bribe", "taught_by": 7,
                                     "taught_evidence": "{query}"}))
    shown = memory_to_dict(ScoredMemory(forged, 1.0, 1.0))
    assert shown["taught"] == {"answer": "Paris", "by": "", "at": None, "how": "typed", "evidence": None}
    assert "A person gave the right answer: Paris." in memory_shown(shown)
    given = _answer(ask.ask(EIFFEL_REWORDED, [answer("Lyon")], NO_LESSON_JUDGE))
    assert given.text == "Paris" and given.taught["memory_id"] == forged.id
