"""`python -m app` (ttrl.worker = "process", the tiny model) started on a learning folder found damaged
in each of seven ways: the app serves with the last Planner version that loads, says which version
or file it set aside and why (at start and in the Learning view), its worker learns the signal that
was waiting, and SIGTERM stops both."""

from __future__ import annotations

import json
import signal

import pytest

from app.escaping import escape_markdown
from app.learning_tab import load_learning
from app.session import AppContext
from backend.config import load_config
from backend.feedback import FeedbackQueue
from memory_db import MemoryStore
from tests.app.app_process import AppProcess, process_exists, wait_for_worker
from tests.app.conftest import SHARED_INDEX_DIR, make_runtime
from tests.conftest import worker_config_file
from tests.learning_folder import DAMAGES, two_promoted_versions
from tests.waiting import wait_until
from training.ttrl import Signal
from training.ttrl.live import learning_root, worker_handle
from training.ttrl.versions import VersionStore

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


@pytest.mark.timeout(600)  # the app and its worker start (up to START_S each), then the worker learns a signal
@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
def test_the_app_starts_on_a_damaged_learning_folder_and_learns_with_the_last_version_that_loads(
        tmp_path, tiny_model_dir, shared_tools, embedder, damage):
    path = worker_config_file(tmp_path, tiny_model_dir, SHARED_INDEX_DIR)
    config = load_config(path, environ={})
    root = learning_root(config)
    two_promoted_versions(root, tiny_model_dir)
    damage.apply(root)
    answering = f"v{damage.answering:04d}"
    database = MemoryStore(config.resolved_memory_url)
    FeedbackQueue(database).add_signal("stream:1", namespace="default", run_id="r1",
                                       signal=Signal(QUESTION, "ground_truth", "default", "Arthur's Magazine",
                                                     "stream:1").to_dict())
    app = AppProcess(path)
    runtime = None
    try:
        app.serving()
        worker = wait_for_worker(database, app)
        assert f"Planner {answering}." in app.wait_for("Test-time learning is on")
        assert damage.note in app.wait_for("Learning folder: ")
        assert "Traceback" not in app.output

        assert VersionStore(root).current().number == damage.answering
        set_aside = [p.name for p in (root / "versions" / "quarantine").glob("[vc]*")]  # not quarantined.jsonl
        if damage.set_aside is None:
            assert set_aside == []
        else:
            [moved] = set_aside
            assert moved.startswith(damage.set_aside)

        # The worker learns the waiting signal with the version that loads; nothing is marked taken unlearned.
        signals = root / "signals.jsonl"
        first = wait_until(lambda: signals.exists() and signals.read_text().splitlines(), 240,
                           "the worker to learn the waiting signal")[0]
        learned = json.loads(first)
        assert learned["source"] == "stream:1" and "error" not in learned and learned["planner_version"] == answering

        # The Learning view on the same folder and database: what was set aside and why, one version named.
        runtime = make_runtime(config, shared_tools, embedder)
        status = load_learning(AppContext(runtime, learner=worker_handle(runtime)), None)[0]
        assert escape_markdown(damage.note) in status
        assert f"- Current Planner: `{answering}`" in status and f"The Planner answering now: `{answering}`" in status

        app.stops_with(signal.SIGTERM)
        assert not process_exists(worker) and database.learner_lease().read().owner is None
    finally:
        app.end()
        if runtime is not None:
            runtime.close()
        database.close()


def test_an_ask_on_a_damaged_learning_folder_answers_with_the_last_version_that_loads(
        tmp_path, tiny_model_dir, shared_tools, capsys):
    from app.cli import main

    path = worker_config_file(tmp_path, tiny_model_dir, SHARED_INDEX_DIR, worker="external")
    config = load_config(path, environ={})
    two_promoted_versions(learning_root(config), tiny_model_dir)
    DAMAGES["truncated adapter weights"].apply(learning_root(config))
    assert main(["--config", str(path), "ask", QUESTION]) == 0
    out = capsys.readouterr().out
    assert "Planner v0001 answers (test-time learning).\n" in out and "\nDone: " in out
    store = MemoryStore(config.resolved_memory_url)
    try:
        [memory] = store.list(namespace="default")
        assert memory.provenance["models"]["planner"].endswith("+v0001")  # v0001 planned, not the base model
    finally:
        store.close()
    assert [record["item"] for record in VersionStore(learning_root(config)).quarantined()] == ["v0002"]
