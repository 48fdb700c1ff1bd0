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
