"""Smoke evaluation: 3 questions per method through the real agent on the tiny random model."""

from __future__ import annotations

import json

import pytest

from backend.methods import METHOD_NAMES as METHODS
from backend.eval.datasets import load_questions
from backend.eval.results import ResultsFile
from backend.eval.spec import MEMORY_FILE, ROWS_FILE
from memory_db import MemoryStore

from .conftest import DEV, SMOKE_QUESTIONS

MEMORY_METHODS = ("mia", "rag", "trace", "memento")


@pytest.mark.parametrize("method", METHODS)
def test_every_question_gets_a_complete_row(smoke_results, method):
    out_dir, outcome = smoke_results[method]
    expected = load_questions(DEV, limit=SMOKE_QUESTIONS)
    rows = ResultsFile(out_dir / ROWS_FILE).read()
    assert rows == outcome.rows
    assert [(r.index, r.id, r.gold) for r in rows] == [(i, q.id, q.answer) for i, q in enumerate(expected)]
    for row in rows:
        assert row.error is None, row.error
        assert row.method == method and row.run_id
        assert row.verdict in ("correct", "incorrect", "not_attempted")
        assert row.correct == (row.verdict == "correct")
        assert row.llm_calls >= 2 and row.prompt_tokens > 0 and row.tool_calls >= 1
        assert sum(row.calls_by_role.values()) == row.llm_calls
        assert row.llm_seconds > 0
        assert row.llm_seconds + row.tool_seconds + row.other_seconds == pytest.approx(row.wall_seconds, abs=0.01)
        assert row.harness_seconds >= row.wall_seconds - 0.01
        assert 0 <= row.first_answer_seconds <= row.harness_seconds


@pytest.mark.parametrize("method", METHODS)
def test_memory_lives_in_the_evaluation_folder_and_evolves(smoke_results, eval_config, embedder, method):
    out_dir, outcome = smoke_results[method]
    rows = outcome.rows
    assert not (eval_config.data_dir / "memory.sqlite").exists()  # the user's memory is never opened
    store = MemoryStore(f"sqlite:///{out_dir / MEMORY_FILE}", embedder=embedder)
    try:
        stored = store.list(namespace=f"eval-{method}", limit=100)
        assert store.namespaces() in ([], [f"eval-{method}"])
    finally:
        store.close()
    if method in MEMORY_METHODS:
        assert all(row.memory_stored for row in rows)
        assert {m.provenance["run_id"] for m in stored} <= {row.run_id for row in rows}
        assert rows[0].memories_used == 0  # the stream starts cold
        assert rows[1].memories_used >= 1 and set(rows[1].memory_ids) <= {rows[0].memory_stored}
        assert rows[2].memories_used >= 1
    else:
        assert stored == [] and all(row.memory_stored is None and row.memories_used == 0 for row in rows)
    # Each run's full event stream is logged inside the folder too.
    for row in rows:
        log_file = out_dir / "runs" / f"eval-{method}" / f"{row.run_id}.jsonl"
        kinds = [json.loads(line)["kind"] for line in log_file.read_text(encoding="utf-8").splitlines()]
        assert kinds[0] == "run_started" and kinds[-1] == "run_finished"


def logged_kinds(smoke_results, method):
    """The event kinds of each of `method`'s runs, from the run logs in its evaluation folder."""
    out_dir, outcome = smoke_results[method]
    return [[json.loads(line)["kind"] for line in (out_dir / "runs" / f"eval-{method}" / f"{row.run_id}.jsonl")
             .read_text(encoding="utf-8").splitlines()] for row in outcome.rows]


def test_mia_plans_while_none_does_not(smoke_results):
    def roles(method):
        return set().union(*(row.calls_by_role for row in smoke_results[method][1].rows))

    # While memory is sparse the Manager's model writes the plan (agent.sparse_memory_planner).
    assert "manager" in roles("mia") and all("plan" in kinds for kinds in logged_kinds(smoke_results, "mia"))
    assert not roles("none") & {"planner", "manager"}
    assert not any("plan" in kinds for kinds in logged_kinds(smoke_results, "none"))
    # rag stores what it did (the Manager composes the summary from the run's steps, without a call)
    assert "planner" not in roles("rag") and all(row.memory_stored for row in smoke_results["rag"][1].rows)


def test_plan_is_the_mia_loop_without_memory(smoke_results):
    """Memory's own effect is `mia` against `plan`: the same Planner, plans and reflections, no memory."""
    plan_rows = smoke_results["plan"][1].rows
    assert not any(row.memory_stored or row.memories_used for row in plan_rows)
    plan_runs, mia_runs = logged_kinds(smoke_results, "plan"), logged_kinds(smoke_results, "mia")
    assert all("plan" in kinds and "memories" not in kinds for kinds in plan_runs)
    # On the first question mia's memory is still empty: the two runs are the same loop, event for event,
    # apart from mia's memory retrieval and storing.
    memory_kinds = {"memories", "memory_stored"}
    assert plan_runs[0] == [kind for kind in mia_runs[0] if kind not in memory_kinds]
