"""backend.feedback on the real agent (tiny model), store, run log and Judge.

(Kept under tests/app/ because the app owns the feedback flow; it tests backend/feedback.py.)
"""

from __future__ import annotations

import json

import pytest

from app.session import AppContext

from backend.agent import RunRequest
from backend.feedback import FeedbackError, FeedbackQueue, feedback_queue_for, submit_feedback
from backend.judge import Judge

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
    queue = feedback_queue_for(runtime.config.data_dir)

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
    queue = FeedbackQueue(tmp_path / "q.jsonl")
    outcome = send(runtime, queue, run["run_started"].run_id, right_answer=answer)  # the answer itself
    assert outcome.label_after == "correct"
    assert runtime.store.get(run["memory_stored"].memory_id, namespace="default").correct
    # A choice question, answered by one of its options: graded by the option the answer names.
    assert queue.items()[0].judge_method == "the Judge (closed-choice) against your right answer"
    # Queue survives a new reader (a restarted app).
    assert FeedbackQueue(tmp_path / "q.jsonl").items()[0].right_answer == answer


def test_bad_feedback_is_refused_with_a_sentence(runtime, tmp_path):
    queue = FeedbackQueue(tmp_path / "q.jsonl")
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
    queue = FeedbackQueue(tmp_path / "q.jsonl")
    outcome = send(runtime, queue, run["run_started"].run_id, thumbs="down", right_answer=run["answer"].text)
    assert outcome.label_after == "incorrect"
    assert "the Judge had said correct" in queue.items()[0].judge_method
    assert runtime.store.get(run["memory_stored"].memory_id, namespace="default").correct is False


def test_a_torn_last_line_is_skipped_reported_and_kept(runtime, tmp_path):
    queue = FeedbackQueue(tmp_path / "q.jsonl")
    run_id = finished_run(runtime)["run_started"].run_id
    send(runtime, queue, run_id, comment="first")
    torn = b'{"run_id": "' + run_id.encode() + b'", "namespace": "default", "us'  # power lost mid-write
    with open(queue.path, "ab") as fp:
        fp.write(torn)

    assert [i.comment for i in queue.items()] == ["first"]  # readers skip it instead of failing
    assert any("cut short" in problem for problem in queue.damage())
    outcome = send(runtime, queue, run_id, thumbs="up", comment="second")  # later feedback still works
    assert outcome.queued == 2
    assert [i.comment for i in queue.items()] == ["first", "second"]
    assert [json.loads(line)["comment"] for line in queue.path.read_text().splitlines()] == ["first", "second"]
    assert queue.torn_path.read_bytes() == torn + b"\n"  # kept, not lost
    assert any("kept in q.jsonl.torn" in problem for problem in queue.damage())


def test_the_queued_count_a_user_sees_is_their_own(runtime, tmp_path):
    queue = FeedbackQueue(tmp_path / "q.jsonl")
    for namespace in ("alice", "alice", "bob"):
        run_id = finished_run(runtime, namespace=namespace)["run_started"].run_id
        outcome = submit_feedback(store=runtime.store, runlog=runtime.runlog, judge=Judge(runtime.agent.models["judge"]),
                                  queue=queue, namespace=namespace, run_id=run_id, user=namespace, comment="noted")
    assert outcome.queued == 1 and len(queue) == 3
    assert any("(1 of your item waiting)" in line for line in outcome.changes)


def test_feedback_queued_before_a_crash_is_recorded_once_when_the_app_starts_again(runtime, monkeypatch):
    first = finished_run(runtime, ground_truth="Arthur's Magazine")  # verified, so later runs are shown it
    second = finished_run(runtime, SIMILAR)  # retrieves the first run's memory
    run_id, memory_id = second["run_started"].run_id, second["memory_stored"].memory_id
    used = [m["id"] for m in second["memories"].successful + second["memories"].failed]
    assert first["memory_stored"].memory_id in used
    # the run's memory (a near-duplicate of the first, merged into it): thumbs go against its label
    was_correct = runtime.store.get(second["memory_stored"].memory_id, namespace="default").correct
    counts = {i: runtime.store.get(i, namespace="default").usage_count for i in used}
    queue = feedback_queue_for(runtime.config.data_dir)

    def power_cut(*args, **kwargs):
        raise RuntimeError("power cut between queueing and recording")

    with monkeypatch.context() as patched:
        patched.setattr(runtime.store, "record_verdict", power_cut)
        with pytest.raises(RuntimeError, match="power cut"):
            send(runtime, queue, run_id, thumbs="down" if was_correct else "up")
    assert len(queue) == 1  # the person's word was kept
    assert runtime.store.get(memory_id, namespace="default").correct is was_correct  # but not yet applied

    AppContext(runtime)  # the app starts again: the queued feedback is applied
    AppContext(runtime)  # and a second start applies nothing twice
    relabelled = runtime.store.get(memory_id, namespace="default")
    assert relabelled.correct is (not was_correct) and relabelled.provenance["verified"] is True
    assert {i: runtime.store.get(i, namespace="default").usage_count for i in used} == {i: n + 1 for i, n in counts.items()}
    assert [h.action for h in runtime.store.history(memory_id, namespace="default")].count("relabel") == 1


def test_past_runs_show_the_persons_verdict_after_feedback_and_no_rows_for_refused_questions(runtime):
    from app.research_tab import history_rows

    ctx = AppContext(runtime)
    run = finished_run(runtime, ground_truth="Arthur's Magazine")
    list(runtime.agent.run(RunRequest("   ")))  # refused before it started: no past run
    run_id = run["run_started"].run_id
    [row] = history_rows(ctx, "default")
    assert row[0] == run_id and row[4] == run["verdict"].label
    flipped = "down" if run["verdict"].label == "correct" else "up"
    send(runtime, ctx.queue, run_id, thumbs=flipped)
    [row] = history_rows(ctx, "default")
    assert row[4] == ("incorrect" if flipped == "down" else "correct") + " (your feedback)"
    send(runtime, ctx.queue, run_id, comment="a comment gives no verdict")
    assert history_rows(ctx, "default")[0][4].endswith("(your feedback)")
