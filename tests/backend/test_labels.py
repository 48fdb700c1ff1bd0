"""One label for a run and its memory (backend.labels): the trace, the report, the Memory view and
History say the same words; a recalled answer names its evidence in words, never a null; typing the
run's own answer is a confirmation, another one a correction; a re-ask counted on the person's
memory says so beside its own verdict."""

from __future__ import annotations

from app.memory_view import label_text, table_rows
from app.render_html import transcript_of
from app.report import report_markdown
from app.wording import verdict_provenance
from backend.events import AnswerReady, MemoryStored, RunStarted, VerdictReady
from backend.feedback import FeedbackQueue
from backend.labels import feedback_words, memory_words, run_words, verdict_words
from backend.taught import answer_note
from tests.backend.scripted_model import answer_turn as answer, tool_call_turn as call
from tests.backend.test_taught_answers import EIFFEL, NO_LESSON_JUDGE, world  # noqa: F401  (world: a fixture)


def stored(events) -> MemoryStored:
    return next(e for e in events if isinstance(e, MemoryStored))


def test_a_persons_thumbs_is_the_runs_label_in_every_view(world):  # noqa: F811
    ask, store = world
    events = ask.ask(EIFFEL, [call("search", query_list=["Eiffel Tower"]), answer("Paris")], NO_LESSON_JUDGE)
    verdict = next(e for e in events if isinstance(e, VerdictReady))
    memory = store.get(stored(events).memory_id, namespace="alice")
    assert stored(events).label == memory_words(memory) == verdict_words(verdict) == "incorrect (the Judge's opinion, unverified)"

    ask.teach(events, thumbs="up")
    memory = store.get(memory.id, namespace="alice")
    [item] = FeedbackQueue(store).items("alice")
    words = "correct (you confirmed it)"
    assert feedback_words(item) == memory_words(memory) == run_words(verdict, item, memory) == words
    assert table_rows([memory])[0][3] == words and label_text(memory) == f"{words}: a successful strategy"
    page = transcript_of(events)
    page.feedback, page.memory = item, memory
    assert page.label == words and f'<b class="run-label">{words}</b>' in page.trace_html()
    assert f"**Verdict:** {words}, the run's own verdict was incorrect" in report_markdown(events, feedback=item,
                                                                                          memory=memory)
    assert f"## Memory stored\n\n`{memory.id}` ({words}, " in report_markdown(events, feedback=item, memory=memory)


def test_a_recalled_answer_names_its_evidence_and_is_counted_on_the_persons_memory(world):  # noqa: F811
    ask, store = world
    first = ask.ask(EIFFEL, [call("search", query_list=["Eiffel Tower"]), answer("Bordeaux")], NO_LESSON_JUDGE)
    ask.teach(first, thumbs="down", right_answer="Paris")
    again = ask.ask(EIFFEL, [])
    verdict = next(e for e in again if isinstance(e, VerdictReady))
    assert verdict.label == "correct" and verdict.method.startswith("the answer you typed on ")
    assert "None" not in verdict_provenance(verdict)
    assert verdict_provenance(verdict).startswith("verified: from the answer you typed on ")
    kept = stored(again)
    assert kept.kept_from == next(e for e in first if isinstance(e, RunStarted)).run_id
    assert kept.label == "incorrect (you corrected it)"  # the earlier run's memory keeps the label of its answer
    trace = transcript_of(again).trace_html()
    assert "correct (from the answer you typed on" in trace
    assert "counted on the memory of an earlier run of this question" in trace
    given = [e for e in again if isinstance(e, AnswerReady)][-1]
    assert answer_note(given.taught).startswith("You corrected this on")


def test_typing_the_runs_own_answer_confirms_it(world):  # noqa: F811
    ask, store = world
    first = ask.ask(EIFFEL, [call("search", query_list=["Eiffel Tower"]), answer("Paris")], NO_LESSON_JUDGE)
    ask.teach(first, right_answer="Paris")
    memory = store.get(stored(first).memory_id, namespace="alice")
    assert memory_words(memory) == "correct (you confirmed it)"
    again = ask.ask(EIFFEL, [])
    given = [e for e in again if isinstance(e, AnswerReady)][-1]
    assert given.taught["changed"] is False
    assert answer_note(given.taught).startswith("You confirmed this on")
    assert "You corrected" not in transcript_of(again).answer_html()


def test_a_thumbs_down_marks_it_wrong_and_an_old_taught_event_still_reads(world):  # noqa: F811
    ask, store = world
    events = ask.ask(EIFFEL, [call("search", query_list=["Eiffel Tower"]), answer("Paris")], NO_LESSON_JUDGE)
    ask.teach(events, thumbs="down")
    memory = store.get(stored(events).memory_id, namespace="alice")
    assert memory_words(memory) == "incorrect (you marked it wrong)"
    logged_before = {"answer": "Paris", "question": EIFFEL, "memory_id": "m", "by": "alice", "at": 1796385600.0,
                     "how": "typed", "similarity": 1.0, "evidence": None, "confirmed": True}  # no "changed" yet
    assert answer_note(logged_before) == "You corrected this on 4 Dec 2026: Paris. A retrieved source states it (cited below)."
