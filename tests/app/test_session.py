"""Who sees which namespace, and what the read-only demo refuses."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from unittest.mock import ANY

import pytest

from app.auth import User, UserDirectory
from app.readonly import ReadOnlyStore
from app.run_history import history_rows
from app.session import AppContext, ReadOnlyModeError
from backend.agent import RunRequest
from backend.events import RunStarted


def users() -> UserDirectory:
    return UserDirectory({"alice": User("alice", "scrypt$x"), "root": User("root", "scrypt$x", admin=True)})


def as_user(name):
    return SimpleNamespace(username=name)


def test_namespaces_follow_the_login(runtime):
    ctx = AppContext(runtime, users=users())
    assert ctx.namespace_of(as_user("alice")) == "alice"
    assert ctx.visible_namespace(as_user("alice"), "root") == "alice"  # a user cannot look elsewhere
    assert ctx.visible_namespace(as_user("root"), "alice") == "alice"  # an admin can
    assert not ctx.is_admin(as_user("alice")) and ctx.is_admin(as_user("root"))
    local = AppContext(runtime)
    assert local.namespace_of(as_user(None)) == "default"


def test_read_only_demo_reads_but_never_writes(runtime):
    ctx = AppContext(runtime, read_only=True)
    assert isinstance(ctx.agent.store, ReadOnlyStore)
    with pytest.raises(ReadOnlyModeError, match="read-only demo"):
        ctx.require_writable()
    assert AppContext(runtime).agent is runtime.agent


def test_read_only_visitors_runs_are_not_kept_nor_shown_to_the_next_visitor(runtime):
    list(runtime.agent.run(RunRequest("Who founded Arthur's Magazine?")))  # the host's own run, before the demo
    assert len(runtime.runlog.list_runs("default")) == 1
    demo = AppContext(runtime, read_only=True)
    events = list(demo.agent.run(RunRequest("What did the previous visitor ask?")))
    assert events[-1].kind == "run_finished"
    assert len(runtime.runlog.list_runs("default")) == 1  # the visitor's run was not written
    assert history_rows(demo, demo.namespace_of(None)) == []  # nor is the host's run shown
    assert len(history_rows(AppContext(runtime), "default")) == 1
    assert not demo.is_admin(None)  # no visitor may pick another namespace to look at
    assert demo.visible_namespace(None, "alice") == "default"


QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def test_a_run_whose_page_closed_finishes_into_a_real_history_row(runtime):
    from app.question_run import QuestionRun

    ctx = AppContext(runtime)
    question_run = QuestionRun(ctx, RunRequest(QUESTION), threading.Event())
    updates = question_run.follow()
    run_id = next(updates).run_id  # the run has started...
    assert ctx.runs_under_way == {run_id}
    assert history_rows(ctx, "default")[0][3:] == ["(not yet)", "under way"]
    updates.close()  # ...and the page goes away: Gradio closes a closed tab's generator
    assert question_run.ended.wait(timeout=120)
    events = runtime.runlog.load("default", run_id)
    finished = events[-1]
    verdict = next(e for e in events if e.kind == "verdict")
    assert finished.kind == "run_finished" and not finished.stopped and finished.answer  # it ran to its end
    assert history_rows(ctx, "default") == [[run_id, ANY, QUESTION, finished.answer, f"{verdict.label} (the Judge's opinion, unverified)"]]
    assert ctx.runs_under_way == set()


def test_a_run_the_app_stopped_in_the_middle_says_so_in_history(runtime):
    runtime.runlog.append("default", RunStarted("cut-short", question=QUESTION, namespace="default"))
    [row] = history_rows(AppContext(runtime), "default")
    assert row[2:] == [QUESTION, "(no answer)", "interrupted: the app stopped before the run finished"]


def test_a_document_link_opens_only_the_callers_own_or_a_shared_passage(runtime, tmp_path, embedder):
    from app.source_view import open_locator
    from backend.documents import DocumentStore

    notes = tmp_path / "reactors.md"
    notes.write_text("# Reactors\n\nThe Quillmoor reactor opened in 1987.\n", encoding="utf-8")
    runtime.documents = store = DocumentStore(tmp_path / "documents", embedder=embedder)
    store.add_paths("alice", "survey", [notes])
    store.add_paths("root", "common", [notes], shared=True)
    own = store.search("alice", ["Quillmoor reactor"], k=1)[0][0][0].url
    shared = store.search("alice", ["Quillmoor reactor"], k=2)[0]
    shared = next(passage.url for passage, _ in shared if passage.url.startswith("doc://shared/"))
    ctx = AppContext(runtime, users=users())

    def opened(user, locator):
        view = open_locator(ctx, ctx.namespace_of(as_user(user)), user, locator)
        return view.file, view.html

    path, text = opened("alice", own)
    assert "document reactors.md (collection survey)" in text and "The Quillmoor reactor opened in 1987." in text
    assert path is not None and ctx.files.may_read(path, "alice") and not ctx.files.may_read(path, "root")
    path, text = opened("root", own)  # alice's locator, asked for by someone else
    assert path is None and "1987" not in text and "yours to read" in text
    path, text = opened("root", shared)  # a shared collection opens for everyone
    assert path is not None and "shared collection common" in text and "1987" in text
    for junk in ("", "https://example.org", "doc://../../etc/passwd", "doc://" + "a/" * 2000):
        path, text = opened("alice", junk)
        assert path is None and "⚠️" in text and "1987" not in text


def test_after_feedback_the_page_promises_learning_only_while_the_learner_runs(learning_runtime):
    from app.learning_signals import learning_state_line
    from training.ttrl.live import build_learner

    learner = build_learner(learning_runtime)
    ctx = AppContext(learning_runtime, learner=learner)
    not_running = "Queued (0 signals pending); the learner is not running: see Learning (current version v0000)."
    assert learning_state_line(ctx) == not_running  # built, never started
    learner.start()
    try:
        assert learner.running
        assert learning_state_line(ctx).startswith("Test-time learning is on: 0 signals pending; the Planner learns")
    finally:
        learner.stop(timeout=60)
    assert learning_state_line(ctx) == not_running  # stopped (or killed): no promise
    started_without = AppContext(learning_runtime, learning_off_reason="the Planner runs on llama.cpp.")
    assert learning_state_line(started_without) == (
        "Queued; test-time learning is not running in this app (the Planner runs on llama.cpp): see Learning.")
