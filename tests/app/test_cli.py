from __future__ import annotations

import io
import os
import signal
import sys
from pathlib import Path

from app.auth import verify_password
from app.cli import main
from tests.waiting import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_refuses_a_public_host_without_logins(capsys):
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "--auth users.toml" in capsys.readouterr().err


def test_a_broken_users_file_stops_the_start(tmp_path, capsys):
    bad = tmp_path / "users.toml"
    bad.write_text('[users.a]\npassword = "plain"\n')
    assert main(["--host", "0.0.0.0", "--auth", str(bad)]) == 2
    assert "never the plain password" in capsys.readouterr().err


def test_hash_password_prints_a_verifiable_hash(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("correct horse\n"))
    assert main(["hash-password", "--stdin"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed.startswith("scrypt$") and verify_password("correct horse", printed)


def test_a_busy_port_is_named_with_the_option_that_picks_another(monkeypatch, capsys):
    import socket

    import app.ui

    def no_runtime(*args, **kwargs):
        raise AssertionError("the runtime is not built when the port is taken")

    monkeypatch.setattr(app.ui, "build_runtime", no_runtime)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"Port {port} on 127.0.0.1 is already in use" in err and "--port" in err and "Traceback" not in err


def fresh_data_folder_config(tmp_path: Path, model_dir: Path) -> Path:
    """A configuration with every role on the tiny model and a data folder as a first run finds it,
    but for the wiki's BM25 index, linked from the test cache (building it takes minutes): no dense
    vectors, and hybrid search asked for."""
    shared = REPO_ROOT / ".mia" / "test-cache" / "index"
    index = tmp_path / "data" / "index"
    index.mkdir(parents=True)
    (index / "image_index").symlink_to(shared / "image_index")
    for version in (shared / "wiki_index").iterdir():
        (index / "wiki_index" / version.name).mkdir(parents=True)
        for part in version.iterdir():
            if not part.name.startswith("dense-"):
                (index / "wiki_index" / version.name / part.name).symlink_to(part)
    roles = "".join(f'[roles.{role}]\nbackend = "embedded"\nmodel_dir = "{model_dir}"\nmax_new_tokens = 16\n'
                    for role in ("planner", "executor", "manager", "judge"))
    path = tmp_path / "mia.toml"
    path.write_text(f'[paths]\ndata_dir = "{tmp_path / "data"}"\n[agent]\nmax_turns = 1\n[search]\nhybrid = true\n'
                    f"[ttrl]\nenabled = false\n{roles}", encoding="utf-8")
    return path


def test_the_first_ask_answers_with_bm25_while_a_process_of_its_own_builds_the_vectors(
        tmp_path, tiny_model_dir, shared_tools, capsys):
    from app.vector_build import build_running, builder_pid, log_path
    from backend.config import load_config

    path = fresh_data_folder_config(tmp_path, tiny_model_dir)
    config = load_config(path, environ={})
    assert main(["--config", str(path), "ask", "Which magazine was started first, Arthur's Magazine or First for Women?"]) == 0
    out = capsys.readouterr().out
    assert ("Search: BM25 only; dense vectors are being built (python -m app prepare builds them now); "
            f"log: {log_path(config)}\n") in out
    assert "\nAnswer" in out and "\nDone: " in out  # answered, without waiting for the vectors
    # The build goes on in a process of its own, after the answer; this test stops it.
    wait_until(lambda: build_running(config) and builder_pid(config), 120,
               f"the vector build to start (its log: {log_path(config)})")
    pid = builder_pid(config)
    command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert [b"--config", str(path).encode(), b"prepare", b"--search-only", b"--background"] == command[-6:-1]
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not build_running(config), 60, "the vector build to stop on SIGTERM")


def test_an_ask_answers_with_the_promoted_planner_while_the_learner_gives_way(
        tmp_path, tiny_model_dir, shared_tools, embedder, capsys, monkeypatch):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    import app.render_text
    from backend.config import load_config
    from memory_db import MemoryStore
    from tests.conftest import worker_config_file
    from training.ttrl.live import learning_root
    from training.ttrl.version_folder import PROMOTED, Version
    from training.ttrl.versions import VersionStore

    path = worker_config_file(tmp_path, tiny_model_dir, REPO_ROOT / ".mia" / "test-cache" / "index", worker="external")
    config = load_config(path, environ={})
    # A version the learner worker promoted: a non-zero adapter of the tiny model.
    torch.manual_seed(0)
    tuned = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    adapter = learning_root(config) / "versions" / "v0001" / "adapter"
    tuned.save_pretrained(adapter)
    versions = VersionStore(learning_root(config))
    versions.record(Version(1, status=PROMOTED, parent=0, adapter_dir=str(adapter)))
    versions.make_current(1)

    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    lease = store.learner_lease()
    told_to_give_way = []
    printed = app.render_text.event_to_text
    monkeypatch.setattr(app.render_text, "event_to_text",
                        lambda event: (told_to_give_way.append(lease.read().users_active), printed(event))[1])
    try:
        assert main(["--config", str(path), "ask", "Which magazine was started first, Arthur's Magazine or First for Women?"]) == 0
        out = capsys.readouterr().out
        assert "Planner v0001 answers (test-time learning).\n" in out and "\nDone: " in out
        assert told_to_give_way and all(told_to_give_way)  # every event printed while the worker was told to wait
        assert not lease.read().users_active  # and it may go on once the answer is given
        [memory] = store.list(namespace="default")
        assert memory.provenance["models"]["planner"].endswith("+v0001")  # the promoted version planned
    finally:
        store.close()
