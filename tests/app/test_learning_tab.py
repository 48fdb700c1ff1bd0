"""The Learning view's functions (what its buttons call) on a real learner: the tiny model, the real
feedback queue, memory store, Planner versions on disk, and the app's Planner swapped on rollback."""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

import pytest

from app.auth import User, UserDirectory
from app.learning_signals import feedback_changes, learning_state_line, queue_for_learning
from app.learning_tab import load_learning, pause_learning, resume_learning, rollback_learning
from app.session import AppContext
from app.transcript import RunTranscript
from backend.agent import RunRequest
from backend.feedback import submit_feedback
from backend.judge import Judge

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
BOB_QUESTION = "Were Scott Derrickson and Ed Wood of the same nationality?"


def users() -> UserDirectory:
    return UserDirectory({"alice": User("alice", "scrypt$x"), "bob": User("bob", "scrypt$x"),
                          "root": User("root", "scrypt$x", admin=True)})


def as_user(name):
    return SimpleNamespace(username=name)


def view(ctx, who):
    status, controls, versions, signals, queue_text, queue_rows = load_learning(ctx, as_user(who))
    return SimpleNamespace(status=status, controls_visible=controls["visible"], versions=versions, signals=signals,
                           queue_text=queue_text, queue_rows=queue_rows)


def research(runtime, question: str, namespace: str) -> tuple[RunTranscript, bool]:
    transcript, finished = RunTranscript(), False
    for event in runtime.agent.run(RunRequest(question, namespace=namespace)):
        transcript.add(event)
        finished = finished or event.kind == "run_finished"
    return transcript, finished


@pytest.fixture
def learner(learning_runtime):
    from training.ttrl.live import build_learner

    built = build_learner(learning_runtime)
    # Two signals per update, and a canary that always promotes: the test knows which versions it gets.
    built.settings = replace(built.settings, signals_per_update=2, canary_tolerance=10.0)
    yield built
    built.stop(timeout=60)


def test_without_a_learner_the_view_says_how_to_switch_it_on(runtime):
    ctx = AppContext(runtime)
    v = view(ctx, None)
    assert "switched off" in v.status and "enabled = true" in v.status and "MIA_TTRL_ENABLED=true" in v.status
    assert v.controls_visible is False and v.versions == [] and v.signals == []
    assert "feedback items" in v.queue_text and "Nothing reads them" in v.queue_text
    assert "switched off" in pause_learning(ctx, as_user(None))[0]
    assert "switched off (ttrl.enabled = false" in learning_state_line(ctx)

    assert f"The Planner answering now: `{runtime.agent.models['planner'].name}`" in v.status

    demo = AppContext(runtime, read_only=True)
    assert "read-only demo" in view(demo, None).status
    assert "read-only demo" in rollback_learning(demo, 0, as_user(None))[0]

    # A Planner on llama.cpp cannot be trained in place: the view says why learning is not running.
    config = runtime.config
    runtime.config = replace(config, ttrl=replace(config.ttrl, enabled=True))
    try:
        off = AppContext(runtime, learning_off_reason="the Planner runs on llama.cpp (a quantised GGUF).")
        assert "not running**: the Planner runs on llama.cpp" in view(off, None).status
    finally:
        runtime.config = config


def test_status_versions_signals_and_admin_only_controls(learning_runtime, learner):
    rt = learning_runtime
    ctx = AppContext(rt, users=users(), learner=learner)

    # Alice marks an answer wrong and types the right one: the feedback line tells the learner's real state.
    transcript, finished = research(rt, QUESTION, "alice")
    assert finished
    outcome = submit_feedback(store=rt.store, runlog=rt.runlog, judge=Judge(rt.agent.models["judge"]), queue=ctx.queue,
                              namespace="alice", run_id=transcript.run_id, user="alice", thumbs="down",
                              right_answer="Arthur's Magazine", comment=None)
    lines = feedback_changes(ctx, outcome.changes, thumbs="down", right_answer="Arthur's Magazine")
    assert not any("not running yet" in line for line in lines)
    # The learner's worker thread is not started in this test: the line says so, and promises nothing.
    assert lines[-1] == "Queued (1 signal pending); the learner is not running: see Learning (current version v0000)."
    learner.submit(_signal(BOB_QUESTION, "bob", "yes"))
    assert "2 signals pending" in learning_state_line(ctx)  # the local user, or an admin
    assert "1 signal pending" in learning_state_line(ctx, "alice")  # alice counts only her own

    before = view(ctx, "alice")
    assert "not running" in before.status  # the worker thread was not started in this test
    assert "Batch: **0/2**" in before.status and before.versions[0][0] == "v0000 ◀ current"
    assert "- Speed: nothing learned from yet" in before.status

    for _ in range(2):  # both signals scored, then one GRPO update and the canary
        assert learner.work_once() == "processed"
    alice, admin = view(ctx, "alice"), view(ctx, "root")
    assert [row[0] for row in admin.versions] == ["v0001 ◀ current", "v0000"]
    newest = admin.versions[0]
    assert newest[1] == "promoted" and newest[2] == "v0000" and newest[8] == 2 and newest[9] == 4
    assert " vs " in newest[5] and "canary" in newest[10]
    assert "`v0001`" in admin.status and "Pending signals: **0**" in admin.status
    assert re.search(r"- Speed: \d+ s per question learned from \(median of the last 2\); \d+ s per Planner update "
                     r"and its canary \d+ s \(median of the last 1 update\)", admin.status)
    # A version records the prompts it was trained with; after a prompt change the view warns.
    from backend.code_identity import prompts_digest

    promoted = learner.versions.current()
    assert promoted.prompts == prompts_digest() and "other prompts" not in admin.status
    learner.versions.record(replace(promoted, prompts="0" * 16))
    assert "Planner `v0001` was trained with other prompts" in view(ctx, "root").status
    learner.versions.record(promoted)
    # Alice sees only her namespace's signals; the admin sees everyone's.
    assert [row[1] for row in alice.signals] == ["alice"] and alice.signals[0][3] == QUESTION
    assert alice.signals[0][4] == "v0000" and alice.signals[0][6].endswith("/2")
    assert sorted(row[1] for row in admin.signals) == ["alice", "bob"]
    # Nothing waits, and the view does not pretend a learner runs to take what comes (its thread was never started).
    assert "0 signals wait; the learner is not running: its thread is not running" in admin.queue_text
    assert "learner" not in alice.queue_text

    # Only an admin steers the shared Planner.
    assert alice.controls_visible is False and admin.controls_visible is True
    assert "Only an admin" in pause_learning(ctx, as_user("alice"))[0] and not learner.status().paused
    message, status = pause_learning(ctx, as_user("root"))
    assert message.startswith("⏸️ Paused") and "Test-time learning is paused" in status and learner.status().paused
    assert "the learner is not running: see Learning" in learning_state_line(ctx)  # paused, its thread never started
    message, status = resume_learning(ctx, as_user("root"))
    assert message.startswith("▶️ Resumed") and "paused" not in status.split("\n")[0] and not learner.status().paused

    # Rollback: refused for a user, a clear message for a wrong number, and the app's Planner really changes.
    promoted_planner = rt.agent.models["planner"]
    assert "v0001" in promoted_planner.name
    assert "Only an admin" in rollback_learning(ctx, 0, as_user("alice"))[0]
    assert "no Planner version 99" in rollback_learning(ctx, 99, as_user("root"))[0]
    assert "already the current" in rollback_learning(ctx, 1, as_user("root"))[0]
    message, status, versions = rollback_learning(ctx, 0, as_user("root"))
    assert message.startswith("↩️ Rolled back") and "v0000" in message
    assert learner.versions.current().number == 0 and versions[-1][0] == "v0000 ◀ current"
    assert rt.agent.models["planner"] is not promoted_planner and "v0001" not in rt.agent.models["planner"].name

    from training.ttrl.version_folder import REJECTED, Version

    learner.versions.record(Version(2, status=REJECTED, parent=1, note="did worse on the canary"))
    message, _, versions = rollback_learning(ctx, 2, as_user("root"))
    assert message.startswith("⚠️ Not rolled back") and "rejected by the canary" in message
    assert versions[0][:2] == ["v0002", "rejected"] and learner.versions.current().number == 0


def test_finished_runs_become_signals_typed_answers_always_unsupervised_only_opted_in(learning_runtime, learner):
    rt = learning_runtime
    ctx = AppContext(rt, learner=learner)
    transcript, finished = research(rt, QUESTION, "default")
    args = dict(finished=finished, ground_truth=None, image=None)
    assert queue_for_learning(ctx, transcript, QUESTION, "default", **args) is None  # ttrl.unsupervised is off
    typed = queue_for_learning(ctx, transcript, QUESTION, "default", **{**args, "ground_truth": " Arthur's Magazine "})
    assert typed and "against your right answer" in typed and "1 signal pending" in typed
    learner.poll_feedback()  # the learner takes it from the database queue
    signal = learner.pending[-1]
    assert (signal.kind, signal.answer, signal.source) == ("ground_truth", "Arthur's Magazine",
                                                           f"ground_truth:{transcript.run_id}")
    rt.config = replace(rt.config, ttrl=replace(rt.config.ttrl, unsupervised=True))
    assert queue_for_learning(ctx, transcript, QUESTION, "default", **{**args, "finished": False}) is None
    assert queue_for_learning(ctx, transcript, QUESTION, "default", **{**args, "image": "/tmp/x.png"}) is None
    assert queue_for_learning(AppContext(rt), transcript, QUESTION, "default", **args) is None  # no learner
    assert "not running in this app" in view(AppContext(rt), None).status  # enabled, but started without one
    sentence = queue_for_learning(ctx, transcript, QUESTION, "default", **args)
    assert sentence and "2 signals pending" in sentence and "unsupervised" in sentence
    learner.poll_feedback()
    signal = learner.pending[-1]
    assert (signal.kind, signal.question, signal.namespace, signal.answer) == ("unsupervised", QUESTION, "default", "")
    assert signal.source == f"unsupervised:{transcript.run_id}"


def _signal(question, namespace, answer):
    from training.ttrl.signals import Signal

    return Signal(question, "ground_truth", namespace, answer, "stream")


def test_the_view_names_the_version_answering_now_as_its_table_does(learning_runtime):
    """A worker in another process promotes a version: before the app's next question, the view names
    that version both as current and as the Planner answering; one the app cannot load is said so."""
    import json

    from tests.learning_folder import write_adapter
    from training.ttrl.live import learning_root, worker_handle
    from training.ttrl.version_folder import ADAPTER, PROMOTED, Version
    from training.ttrl.versions import VersionStore

    rt = learning_runtime
    ctx = AppContext(rt, learner=worker_handle(rt))  # no worker runs: the versions come from the shared folder
    base = rt.agent.models["planner"].name
    assert f"The Planner answering now: `v0000` (the base model), `{base}`." in view(ctx, None).status

    worker_side = VersionStore(learning_root(rt.config))
    for number in (1, 2):
        adapter = write_adapter(worker_side.versions_dir / f"v{number:04d}" / ADAPTER, rt.config.role("planner").model_dir,
                                seed=number)
        worker_side.record(Version(number, status=PROMOTED, parent=number - 1, adapter_dir=str(adapter)))
    worker_side.make_current(1)
    promoted = view(ctx, None)
    assert promoted.versions[0][0] == "v0002" and promoted.versions[1][0] == "v0001 ◀ current"
    assert "- Current Planner: `v0001`" in promoted.status
    answering = rt.agent.models["planner"].name
    assert answering != base and f"The Planner answering now: `v0001`, `{answering}`." in promoted.status

    # v0002's files are whole, but its adapter does not fit this model: the app keeps v0001 and says why.
    config = worker_side.versions_dir / "v0002" / ADAPTER / "adapter_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "target_modules": ["no_such_proj"]}))
    worker_side.make_current(2)
    unloadable = view(ctx, None)
    assert "- Current Planner: `v0002`" in unloadable.status and rt.agent.models["planner"].name == answering
    assert (f"The Planner answering now: `v0001`, `{answering}`. ⚠️ Planner v0002 could not be loaded in this app "
            in unloadable.status)
    assert "v0001 answers instead. Roll back to a version that loads" in unloadable.status
