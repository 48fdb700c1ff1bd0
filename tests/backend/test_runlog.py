import pytest

from backend.events import AnswerReady, RunStarted, ToolCalled, VerdictReady
from backend.runlog import RunLog


def test_runs_round_trip_per_namespace(tmp_path):
    log = RunLog(tmp_path)
    events = [
        RunStarted("run1", question="Q?", namespace="alice"),
        ToolCalled("run1", turn=1, name="search", arguments={"query_list": ["Q"]}),
        AnswerReady("run1", text="A", sources=[{"title": "T", "url": None, "source": "wiki"}]),
        VerdictReady("run1", label="correct", method="exact-match", ground_truth="A"),
    ]
    for e in events:
        log.append("alice", e)
    assert log.load("alice", "run1") == events
    [summary] = log.list_runs("alice")
    assert (summary.run_id, summary.question, summary.answer, summary.verdict) == ("run1", "Q?", "A", "correct")
    assert log.list_runs("bob") == []
    with pytest.raises(KeyError):
        log.load("bob", "run1")


def test_path_traversal_in_names_is_neutralised(tmp_path):
    log = RunLog(tmp_path / "runs")
    log.append("../../etc", RunStarted("../x", question="Q", namespace="../../etc"))
    written = list((tmp_path / "runs").rglob("*.jsonl"))
    assert len(written) == 1 and (tmp_path / "runs") in written[0].parents


def test_a_question_refused_before_its_run_started_is_no_past_run(tmp_path):
    from backend.events import RunFailed, RunFinished

    log = RunLog(tmp_path)
    log.append("alice", RunFailed("bad1", message="The question is empty: type a question to research."))
    for e in (RunStarted("run1", question="Q?", namespace="alice"), RunFailed("run1", message="model server down")):
        log.append("alice", e)
    log.append("alice", RunFailed("bad2", message="The image is not an image that can be read."))
    for e in (RunStarted("run2", question="Q2?", namespace="alice"), RunFinished("run2", answer="A", stopped=True)):
        log.append("alice", e)
    assert {(s.run_id, s.question, s.verdict) for s in log.list_runs("alice")} == {
        ("run1", "Q?", "failed"), ("run2", "Q2?", "stopped")}
    assert len(log.list_runs("alice", limit=1)) == 1


def test_a_field_added_later_is_logged_only_when_set_so_older_logs_and_new_ones_read_alike():
    from backend.events import PlanReady, event_from_dict

    plain = PlanReady("r", text="1. Search", steps=["Search"], at=1.0)
    assert "chosen" not in plain.to_dict() and event_from_dict(plain.to_dict()) == plain
    chosen = PlanReady("r", text="1. Search", steps=["Search"], chosen="plan 2 of 3 written", at=1.0)
    assert event_from_dict(chosen.to_dict()).chosen == "plan 2 of 3 written"
