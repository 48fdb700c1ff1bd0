"""backend.feedback on the real agent (tiny model), store, run log and Judge.

(Kept under tests/app/ because the app owns the feedback flow; it tests backend/feedback.py.)
"""

from __future__ import annotations

import json

import pytest

from app.session import AppContext

from backend.agent import RunRequest
from backend.feedback import FeedbackError, FeedbackItem, FeedbackQueue, submit_feedback
from backend.judge import Judge
from backend.labels import verdict_words

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
SIMILAR = "Which magazine came first, Arthur's Magazine or First for Women?"


def finished_run(runtime, question=QUESTION, **kw):
    events = list(runtime.agent.run(RunRequest(question, **kw)))
    kinds = {e.kind: e for e in events}
    assert "memory_stored" in kinds, [e.to_dict() for e in events if e.kind == "run_failed"]
    return kinds


def send(runtime, queue, run_id, **kw):
    return submit_feedback(store=runtime.store, runlog=runtime.runlog, judge=Judge(runtime.agent.models["judge"]),
                           queue=queue, namespace="default", run_id=run_id, user="tester", **kw)


def test_thumbs_against_the_verdict_relabels_and_updates_win_rates(runtime):
    first = finished_run(runtime, ground_truth="Arthur's Magazine")  # verified, so later runs are shown it
    second = finished_run(runtime, SIMILAR)  # retrieves the first run's memory
    used = [m["id"] for m in second["memories"].successful + second["memories"].failed]
    assert first["memory_stored"].memory_id in used
    run_id, memory_id = second["run_started"].run_id, second["memory_stored"].memory_id
    # the run's memory (a near-duplicate of the first, merged into it): thumbs go against its label
    was_correct = runtime.store.get(second["memory_stored"].memory_id, namespace="default").correct
    before_used = {i: runtime.store.get(i, namespace="default") for i in used}
    queue = FeedbackQueue(runtime.store)

    outcome = send(runtime, queue, run_id, thumbs="down" if was_correct else "up", comment="checked by hand")

    assert outcome.label_after == ("incorrect" if was_correct else "correct")
    assert runtime.store.get(memory_id, namespace="default").correct is (not was_correct)
    assert runtime.store.history(memory_id, namespace="default")[0].action == "relabel"
    for memory_id_used, before in before_used.items():
        after = runtime.store.get(memory_id_used, namespace="default")
        assert after.usage_count == before.usage_count + 1
        assert after.success_count == before.success_count + (0 if was_correct else 1)
    assert any("relabelled" in line for line in outcome.changes)
    assert len(queue) == 1 and queue.items()[0].comment == "checked by hand"

    # The same thumbs again changes nothing more, but is still queued.
    again = send(runtime, queue, run_id, thumbs="down" if was_correct else "up")
    assert again.label_before == again.label_after
    assert runtime.store.get(used[0], namespace="default").usage_count == before_used[used[0]].usage_count + 1
    assert len(queue) == 2


def test_right_answer_goes_through_the_judge(runtime, tmp_path):
    run = finished_run(runtime)
    answer = run["answer"].text
    queue = FeedbackQueue(runtime.store)
    outcome = send(runtime, queue, run["run_started"].run_id, right_answer=answer)  # the answer itself
    assert outcome.label_after == "correct"
    assert runtime.store.get(run["memory_stored"].memory_id, namespace="default").correct
    # A choice question, answered by one of its options: graded by the option the answer names.
    assert queue.items()[0].judge_method == "the Judge (closed-choice) against your right answer"
    # The queue is the database's: another process (a new store on the same database) reads it.
    from memory_db import MemoryStore

    other = MemoryStore(runtime.store.url)
    try:
        assert FeedbackQueue(other).items()[0].right_answer == answer
    finally:
        other.close()


def test_bad_feedback_is_refused_with_a_sentence(runtime, tmp_path):
    queue = FeedbackQueue(runtime.store)
    with pytest.raises(FeedbackError, match="not in your history"):
        send(runtime, queue, "nope", thumbs="up")
    run = finished_run(runtime)
    with pytest.raises(FeedbackError, match="Give a thumbs"):
        send(runtime, queue, run["run_started"].run_id)
    with pytest.raises(FeedbackError, match="under 4,000"):
        send(runtime, queue, run["run_started"].run_id, comment="x" * 5000)
    failed = list(runtime.agent.run(RunRequest("   ")))
    with pytest.raises(FeedbackError, match="did not finish"):
        send(runtime, queue, failed[0].run_id, thumbs="up")
    assert len(queue) == 0


def test_thumbs_win_over_the_judge_and_say_so(runtime, tmp_path):
    run = finished_run(runtime)
    queue = FeedbackQueue(runtime.store)
    outcome = send(runtime, queue, run["run_started"].run_id, thumbs="down", right_answer=run["answer"].text)
    assert outcome.label_after == "incorrect"
    assert "the Judge had said correct" in queue.items()[0].judge_method
    assert runtime.store.get(run["memory_stored"].memory_id, namespace="default").correct is False


def test_a_damaged_queue_entry_is_skipped_and_reported(runtime):
    from sqlalchemy import update

    from memory_db.schema import learning_queue

    queue = FeedbackQueue(runtime.store)
    run_id = finished_run(runtime)["run_started"].run_id
    send(runtime, queue, run_id, comment="first")
    send(runtime, queue, run_id, comment="second")
    with runtime.store._engine.begin() as conn:  # a row someone edited by hand
        conn.execute(update(learning_queue).where(learning_queue.c.seq == 1).values(item='{"run_id": "x", "us'))

    assert [i.comment for i in queue.items(skip_damaged=True)] == ["second"]  # readers skip it instead of failing
    assert any("entry 1 is not valid JSON" in problem for problem in queue.damage())
    with pytest.raises(ValueError, match="entry 1"):
        queue.items()
    outcome = send(runtime, queue, run_id, thumbs="up", comment="third")  # later feedback still works
    assert outcome.queued == 3 and [i.comment for i in queue.items(skip_damaged=True)] == ["second", "third"]


def test_an_older_apps_queue_file_moves_into_the_database_once(runtime):
    """Feedback an older version kept in feedback/ttrl-queue.jsonl: the lines its learner had read come
    in as taken, verdicts a crash left unrecorded are applied once, a torn last line stays in the file."""
    first = finished_run(runtime, ground_truth="Arthur's Magazine")
    run_id, memory_id = first["run_started"].run_id, first["memory_stored"].memory_id
    was_correct = runtime.store.get(memory_id, namespace="default").correct
    flipped = "incorrect" if was_correct else "correct"

    def line(**fields):
        label = "correct" if was_correct else "incorrect"
        values = dict(run_id=run_id, namespace="default", user="tester", question=QUESTION, answer="a", thumbs=None,
                      right_answer=None, comment=None, label_before=label, label_after=label,
                      judge_method="comment only", memory_id=memory_id)
        return json.dumps(FeedbackItem(**{**values, **fields}).__dict__)

    path = runtime.config.data_dir / "feedback" / "ttrl-queue.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [line(comment="read by the old learner"),  # no key: written before verdicts were recorded
             line(thumbs="down" if was_correct else "up", label_after=flipped, judge_method="your thumbs",
                  feedback_id="f" * 32)]  # queued, then the power went before its relabel
    path.write_text("\n".join(lines) + '\n{"run_id": "torn', encoding="utf-8")
    (runtime.config.data_dir / "ttrl").mkdir(parents=True, exist_ok=True)
    (runtime.config.data_dir / "ttrl" / "state.json").write_text('{"feedback_cursor": 1}', encoding="utf-8")

    ctx = AppContext(runtime)
    AppContext(runtime)  # a second start imports nothing twice
    items = ctx.queue.items()
    assert [i.comment for i in items] == ["read by the old learner", None] and len(items) == 2
    assert [e.taken_at is not None for e in ctx.queue.store.queue_entries()] == [True, False]
    assert runtime.store.get(memory_id, namespace="default").correct is (not was_correct)
    assert not path.exists() and path.with_name("ttrl-queue.jsonl.imported").read_text().endswith('{"run_id": "torn')


def test_the_queued_count_a_user_sees_is_their_own(runtime, tmp_path):
    queue = FeedbackQueue(runtime.store)
    for namespace in ("alice", "alice", "bob"):
        run_id = finished_run(runtime, namespace=namespace)["run_started"].run_id
        outcome = submit_feedback(store=runtime.store, runlog=runtime.runlog, judge=Judge(runtime.agent.models["judge"]),
                                  queue=queue, namespace=namespace, run_id=run_id, user=namespace, comment="noted")
    assert outcome.queued == 1 and len(queue) == 3
    assert any("(1 of your item waiting)" in line for line in outcome.changes)


def test_feedback_and_its_relabel_are_written_together_or_not_at_all(runtime, monkeypatch):
    first = finished_run(runtime, ground_truth="Arthur's Magazine")  # verified, so later runs are shown it
    second = finished_run(runtime, SIMILAR)  # retrieves the first run's memory
    run_id, memory_id = second["run_started"].run_id, second["memory_stored"].memory_id
    used = [m["id"] for m in second["memories"].successful + second["memories"].failed]
    assert first["memory_stored"].memory_id in used
    was_correct = runtime.store.get(memory_id, namespace="default").correct
    counts = {i: runtime.store.get(i, namespace="default").usage_count for i in used}
    queue = FeedbackQueue(runtime.store)
    thumbs = "down" if was_correct else "up"
    real_count = runtime.store._count_outcome

    def power_cut(*args, **kwargs):
        real_count(*args, **kwargs)  # the relabel and the win rates are written inside the transaction...
        raise RuntimeError("power cut before the commit")  # ...which never commits

    with monkeypatch.context() as patched:
        patched.setattr(runtime.store, "_count_outcome", power_cut)
        with pytest.raises(FeedbackError, match="could not be saved.*send it again"):
            send(runtime, queue, run_id, thumbs=thumbs)
    assert len(queue) == 0  # neither the feedback...
    assert runtime.store.get(memory_id, namespace="default").correct is was_correct  # ...nor its changes
    assert {i: runtime.store.get(i, namespace="default").usage_count for i in used} == counts

    send(runtime, queue, run_id, thumbs=thumbs)  # sent again: applied once
    relabelled = runtime.store.get(memory_id, namespace="default")
    assert relabelled.correct is (not was_correct) and relabelled.provenance["verified"] is True
    assert {i: runtime.store.get(i, namespace="default").usage_count for i in used} == {i: n + 1 for i, n in counts.items()}
    assert len(queue) == 1


def test_past_runs_show_the_persons_verdict_after_feedback_and_no_rows_for_refused_questions(runtime):
    from app.run_history import history_rows

    ctx = AppContext(runtime)
    run = finished_run(runtime, ground_truth="Arthur's Magazine")
    list(runtime.agent.run(RunRequest("   ")))  # refused before it started: no past run
    run_id = run["run_started"].run_id
    [row] = history_rows(ctx, "default")
    assert row[0] == run_id and row[4] == verdict_words(run["verdict"])  # the words the trace and report use
    flipped = "down" if run["verdict"].label == "correct" else "up"
    send(runtime, ctx.queue, run_id, thumbs=flipped)
    [row] = history_rows(ctx, "default")
    person = "incorrect (you marked it wrong)" if flipped == "down" else "correct (you confirmed it)"
    assert row[4] == person
    send(runtime, ctx.queue, run_id, comment="a comment gives no verdict")
    assert history_rows(ctx, "default")[0][4] == person
