"""The scenario of a wrong answer the Judge liked, replayed through the real loop, store and feedback:
nothing unverified counts as a verified success, a person's label and edit survive the question being
asked again, an unrelated memory is not shown, and every verdict says how it was reached."""

from __future__ import annotations

from app.render_html import transcript_of
from app.render_text import event_to_text
from backend.agent import ResearchAgent, RunRequest
from backend.events import AnswerReady, MemoriesRetrieved, MemoryStored, RunStarted, VerdictReady
from backend.feedback import FeedbackQueue, submit_feedback
from backend.judge import Judge
from backend.runlog import RunLog
from memory_db import MemoryStore
from tests.backend.conftest import scripted_config
from tests.backend.scripted_model import answer_turn as answer, tool_call_turn as call

MAGAZINE = "Which magazine was started first, Arthur's Magazine or First for Women?"
FILM = "Were Scott Derrickson and Ed Wood of the same nationality?"


def test_a_wrong_answer_the_judge_liked_stays_unverified_and_a_persons_word_stays(
        tmp_path, shared_tools, embedder, scripted_model_class):
    config = scripted_config(tmp_path, max_turns=3, guided_actions="off")
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    runlog = RunLog(config.runs_dir)

    def ask(question, executor, judge_choices):
        models = {
            "planner": scripted_model_class("planner", ["1. Search for both magazines"] * 2, ["yes"] * 2),
            "executor": scripted_model_class("executor", executor),
            "judge": scripted_model_class("judge", (), judge_choices),
            "manager": scripted_model_class("manager"),
        }
        agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=runlog)
        return list(agent.run(RunRequest(question, namespace="alice")))

    wrong = [call("search", query_list=["First for Women magazine"]), answer("First for Women")]
    events = ask(MAGAZINE, wrong, ["yes", "yes", "yes", "correct"])
    verdict = next(e for e in events if isinstance(e, VerdictReady))
    assert verdict.source == "judge" and not verdict.verified
    assert "unverified: the Judge's opinion without ground truth" in event_to_text(verdict)
    assert verdict.label == "unsure" and verdict.leaning == "correct"  # the Judge liked it, but cannot confirm it
    stored = store.get(next(e for e in events if isinstance(e, MemoryStored)).memory_id, namespace="alice")
    assert stored.provenance["verified"] is False and stored.correct is False  # not a success of any kind
    stored_event = next(e for e in events if isinstance(e, MemoryStored))
    assert not stored_event.verified and "(unsure (the Judge's opinion, unverified); neither a success nor a failure lesson" \
        in event_to_text(stored_event)
    assert "Memory stored" in transcript_of(events).trace_html() and "(incorrect)" not in transcript_of(events).trace_html()
    other = "Which magazine came out first, Arthur's Magazine or First for Women?"
    shown = next(e for e in ask(other, wrong, ["yes", "yes", "yes", "correct"]) if isinstance(e, MemoriesRetrieved))
    assert shown.failed == [] and shown.successful == []  # the Judge's opinion alone is not shown (weight 0)
    assert next(e for e in events if isinstance(e, AnswerReady)).sources, "the answer cites what states it"

    run_id = next(e for e in events if isinstance(e, RunStarted)).run_id
    queue = FeedbackQueue(store)
    submit_feedback(store=store, runlog=runlog, judge=Judge(scripted_model_class("judge")), queue=queue,
                    namespace="alice", run_id=run_id, user="alice", thumbs="down")
    store.edit(stored.id, namespace="alice", summary="Wrong: Arthur's Magazine (1844) is older.", actor="user:alice")

    again = ask(MAGAZINE, wrong, ["yes", "yes", "yes", "correct"])
    kept = store.get(stored.id, namespace="alice")
    assert next(e for e in again if isinstance(e, MemoryStored)).memory_id == stored.id
    assert (kept.correct, kept.summary) == (False, "Wrong: Arthur's Magazine (1844) is older.")
    assert kept.provenance["verdict_source"] == "feedback"
    assert store.count(namespace="alice") == 1  # the near-duplicate question's run took the Judge-only memory's place
    verified_shown = next(e for e in ask(other, wrong, ["yes"] * 4) if isinstance(e, MemoriesRetrieved))
    assert stored.id in [m["id"] for m in verified_shown.failed]  # a person's lesson is shown

    unrelated = ask(FILM, [call("search", query_list=["Scott Derrickson"]), answer("yes")], ["yes"] * 4)
    shown = next(e for e in unrelated if isinstance(e, MemoriesRetrieved))
    assert shown.successful == [] and shown.failed == []  # the magazine lesson is not shown for a film question
    store.close()
