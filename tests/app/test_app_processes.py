"""Two app processes on one database and data folder: a run, its feedback, History's verdict and the
learning queue, written by one process, are what the other reads and acts on (SQLite, and PostgreSQL
with pgvector when MIA_TEST_POSTGRES_URL is set)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from app.run_history import history_rows
from app.session import AppContext
from backend.agent import RunRequest
from backend.config import load_config
from backend.feedback import submit_feedback
from backend.judge import Judge
from tests.app.conftest import make_runtime
from tests.conftest import REPO_ROOT, worker_config_file

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"

# The second app process: its own runtime on the same configuration; reads History and the queue,
# then gives a thumb on the first process's run.
OTHER_APP = textwrap.dedent('''
    import json, sys
    from app.run_history import history_rows
    from app.session import AppContext
    from backend.config import load_config
    from backend.feedback import submit_feedback
    from backend.judge import Judge
    from backend.runtime import build_runtime

    runtime = build_runtime(load_config(), progress=False, with_documents=False)
    ctx = AppContext(runtime)
    run_id, thumbs = sys.argv[1], sys.argv[2]
    seen = {"history": history_rows(ctx, "default"), "queued": [i.comment for i in ctx.queue.items()]}
    outcome = submit_feedback(store=runtime.store, runlog=runtime.runlog, judge=Judge(runtime.agent.models["judge"]),
                              queue=ctx.queue, namespace="default", run_id=run_id, user="bob", thumbs=thumbs,
                              comment="from the other process")
    seen["label_after"] = outcome.label_after
    print(json.dumps(seen))
    runtime.close()
''')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def memory_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'memory.sqlite'}"
    return request.getfixturevalue("postgres_url")


@pytest.mark.timeout(600)  # a second app process, bounded at 300 s, starts after a question answered here
def test_feedback_history_and_queue_work_across_app_processes(tmp_path, tiny_model_dir, shared_tools, embedder,
                                                              memory_url):
    path = worker_config_file(tmp_path, tiny_model_dir, REPO_ROOT / ".mia" / "test-cache" / "index")
    env = {**os.environ, "MIA_CONFIG": str(path), "MIA_MEMORY_URL": memory_url, "OMP_NUM_THREADS": "1"}
    config = load_config(path, environ={"MIA_MEMORY_URL": memory_url})
    runtime = make_runtime(config, shared_tools, embedder)
    try:
        ctx = AppContext(runtime)
        events = list(runtime.agent.run(RunRequest(QUESTION)))
        run_id = events[0].run_id
        verdict = next(e for e in events if e.kind == "verdict").label
        memory_id = next(e for e in events if e.kind == "memory_stored").memory_id
        submit_feedback(store=runtime.store, runlog=runtime.runlog, judge=Judge(runtime.agent.models["judge"]),
                        queue=ctx.queue, namespace="default", run_id=run_id, user="alice", comment="from this process")
        flipped = "down" if verdict == "correct" else "up"
        other = subprocess.run([sys.executable, "-c", OTHER_APP, run_id, flipped], cwd=REPO_ROOT, env=env,
                               capture_output=True, text=True, timeout=300)
        assert other.returncode == 0, other.stderr[-3000:]
        seen = json.loads(other.stdout.strip().splitlines()[-1])
        # The other process sees this one's run in History and its queued comment...
        assert [row[0] for row in seen["history"]] == [run_id] and seen["queued"] == ["from this process"]
        # ...and its thumb reaches this process: the memory's label, History's verdict, the queue.
        wanted = "incorrect" if flipped == "down" else "correct"
        assert seen["label_after"] == wanted
        assert runtime.store.get(memory_id, namespace="default").correct is (wanted == "correct")
        assert history_rows(ctx, "default")[0][4] == ("incorrect (you marked it wrong)" if wanted == "incorrect"
                                                      else "correct (you confirmed it)")
        assert [i.comment for i in ctx.queue.items()] == ["from this process", "from the other process"]
        assert ctx.queue.untaken_count() == 2  # for the one learner of the deployment to take
    finally:
        runtime.close()
