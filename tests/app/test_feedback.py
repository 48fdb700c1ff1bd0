"""backend.feedback on the real agent (tiny model), store, run log and Judge.

(Kept under tests/app/ because the app owns the feedback flow; it tests backend/feedback.py.)
"""

from __future__ import annotations

import pytest

from backend.agent import RunRequest
from backend.feedback import FeedbackError, FeedbackQueue, feedback_queue_for, submit_feedback
from backend.judge import Judge

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def finished_run(runtime, question=QUESTION, **kw):
    events = list(runtime.agent.run(RunRequest(question, **kw)))
    kinds = {e.kind: e for e in events}
    assert "memory_stored" in kinds, [e.to_dict() for e in events if e.kind == "run_failed"]
    return kinds


def send(runtime, queue, run_id, **kw):
    return submit_feedback(store=runtime.store, runlog=runtime.runlog, judge=Judge(runtime.agent.models["judge"]),
                           queue=queue, namespace="default", run_id=run_id, user="tester", **kw)


def test_thumbs_against_the_verdict_relabels_and_updates_win_rates(runtime):
    first = finished_run(runtime)
    second = finished_run(runtime)  # retrieves the first run's memory
    used = [m["id"] for m in second["memories"].successful + second["memories"].failed]
    assert first["memory_stored"].memory_id in used
    run_id, memory_id = second["run_started"].run_id, second["memory_stored"].memory_id
    was_correct = second["verdict"].label == "correct"
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
    outcome = send(runtime, queue, run["run_started"].run_id, right_answer=answer)  # the answer itself: exact match
    assert outcome.label_after == "correct"
    assert runtime.store.get(run["memory_stored"].memory_id, namespace="default").correct
    assert "exact-match" in queue.items()[0].judge_method
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
