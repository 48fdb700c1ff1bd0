"""Settings: validation, test connection against a real local OpenAI-compatible server, apply."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from app.auth import User, UserDirectory
from app.session import AppContext
from app.settings import (
    ADMINS_ONLY,
    apply_role,
    proposed_config,
    role_rows,
    settings_refusal,
    test_connection as check_connection,
)
from backend.agent import RunRequest
from backend.config import ConfigError
from backend.llm import registry
from backend.llm.connection_check import ConnectionProblem
from backend.llm.registry import BackendSpec
from backend.llm.serve import start_server_in_thread

from tests.backend.scripted_model import ScriptedChatModel


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_invalid_settings_name_the_key(runtime):
    with pytest.raises(ConfigError, match="roles.planner.model"):
        proposed_config(runtime.config, "planner", "openai", "http://127.0.0.1:8000/v1", "", "")
    with pytest.raises(ConfigError, match="roles.planner.base_url"):
        proposed_config(runtime.config, "planner", "openai", "ftp://x", "m", "")
    with pytest.raises(ConfigError, match="roles.cook"):
        proposed_config(runtime.config, "cook", "embedded", "", "", "")


def test_connection_reports_latency_or_the_exact_error(runtime, tiny_chat_model):
    url, stop = start_server_in_thread(tiny_chat_model, served_model_name="tiny")
    try:
        good = proposed_config(runtime.config, "executor", "openai", url, "tiny", "")
        connected = check_connection(good.role("executor"), runtime, "executor", allow_private=True)
        assert connected.startswith("Connected to tiny")
    finally:
        stop()
    down = proposed_config(runtime.config, "executor", "openai", closed_port_url(), "tiny", "")
    message = check_connection(down.role("executor"), runtime, "executor", allow_private=True)
    assert message.startswith("Connection failed:") and "127.0.0.1" in message
    assert "Embedded model answered" in check_connection(runtime.config.role("judge"), runtime, "judge")


def test_apply_switches_one_role_in_the_running_agent(runtime, tiny_chat_model):
    url, stop = start_server_in_thread(tiny_chat_model, served_model_name="tiny")
    try:
        new = proposed_config(runtime.config, "planner", "openai", url, "tiny", "")
        with pytest.raises(ConnectionProblem, match="private or loopback"):
            apply_role(runtime, new, "planner")  # the address policy holds for the ping before applying too
        message = apply_role(runtime, new, "planner", allow_private=True)
        assert "openai:tiny" in message
        assert runtime.agent.models["planner"].name.startswith("openai:tiny")
        assert runtime.agent.models["executor"].name.startswith("embedded")
        assert ["planner", "openai", url, "tiny", runtime.config.role("planner").max_new_tokens] in role_rows(runtime.config)
        kinds = [e.kind for e in runtime.agent.run(RunRequest("Who founded Arthur's Magazine?"))]
        assert "plan" in kinds and kinds[-1] == "run_finished"
    finally:
        stop()


def test_apply_refuses_a_served_model_that_does_not_answer_and_changes_nothing(runtime):
    from backend.llm.base import LLMError

    before = runtime.agent.models["planner"]
    new = proposed_config(runtime.config, "planner", "openai", "http://127.0.0.1:9/v1", "tiny", "")
    with pytest.raises(LLMError, match="127.0.0.1:9"):
        apply_role(runtime, new, "planner", allow_private=True)
    assert runtime.agent.models["planner"] is before
    assert runtime.config.role("planner").backend == "embedded"


def test_settings_are_for_admins_and_the_single_local_user(runtime):
    users = UserDirectory({"alice": User("alice", "scrypt$x"), "root": User("root", "scrypt$x", admin=True)})
    shared = AppContext(runtime, users=users)
    assert settings_refusal(shared, SimpleNamespace(username="alice")) == ADMINS_ONLY
    assert settings_refusal(shared, SimpleNamespace(username="root")) is None
    assert settings_refusal(AppContext(runtime), None) is None  # local mode: the one user is the admin
    assert settings_refusal(AppContext(runtime, read_only=True), None) == ADMINS_ONLY  # a public demo's visitors


class _LeakyServer(BaseHTTPRequestHandler):
    """A loopback-only server that puts a secret in its reason phrase and its error body."""

    def do_POST(self):  # noqa: N802
        body = b'{"error": {"message": "SECRET-IN-BODY: db password hunter2"}}'
        if self.path.startswith("/redirect"):
            self.send_response(302, "SECRET-IN-REASON")
            self.send_header("Location", "http://127.0.0.1:1/v1/chat/completions")
        else:
            self.send_response(401, "SECRET-IN-REASON")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def leaky_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LeakyServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_a_connection_test_follows_the_visit_policy_and_never_shows_the_servers_words(runtime, leaky_server):
    def connect(url: str, **options) -> str:
        role = proposed_config(runtime.config, "executor", "openai", url, "tiny", "").role("executor")
        return check_connection(role, runtime, "executor", **options)

    # Without an admin allowing private hosts, loopback is refused before any connection: an open and
    # a closed port answer alike, so the test cannot scan ports either.
    refused_open, refused_closed = connect(leaky_server + "/v1"), connect(closed_port_url())
    assert refused_open == refused_closed
    assert refused_open.startswith("Connection failed: 127.0.0.1 resolves to a private or loopback address")
    assert "Allow private hosts" in refused_open

    rejected = connect(leaky_server + "/v1", allow_private=True)
    assert rejected == f"Connection failed: {leaky_server}/v1 answered HTTP 401 (Unauthorized); check the API key."
    moved = connect(leaky_server + "/redirect/v1", allow_private=True)
    assert "answered HTTP 302 (Found); redirects are not followed" in moved
    assert not any("SECRET" in message or "hunter2" in message for message in (rejected, moved))


class _HealthServer(BaseHTTPRequestHandler):
    """A server that is not OpenAI-compatible: it answers GET /health, nothing else, and keeps each
    request's method and path."""

    asked: list[str] = []

    def do_GET(self):  # noqa: N802
        self._answer(200 if self.path == "/health" else 404)

    def do_POST(self):  # noqa: N802
        self._answer(404)

    def _answer(self, status: int) -> None:
        self.asked.append(f"{self.command} {self.path}")
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def _check_health(role, context) -> str:
    import httpx

    from backend.llm.base import LLMError

    response = httpx.get(role.base_url + "/health", timeout=context.timeout_s)
    if response.status_code != 200:
        raise LLMError(f"{role.base_url}/health answered HTTP {response.status_code}.")
    return f"{role.base_url} is healthy."


@pytest.fixture
def health_backend(monkeypatch):
    """A served backend of its own protocol in the registry, with a real server: (its URL, the requests)."""
    _HealthServer.asked = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HealthServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    spec = BackendSpec(
        name="health", settings={"base_url": "where the server listens"},
        build=lambda config, role, progress: ScriptedChatModel("health", outputs=["pong"]),
        identity=lambda role: f"health@{role.base_url}", model_label=lambda role: "health",
        connection_check=_check_health, trainable_weights=lambda config, role: None,
        planner_version=lambda config, role, version: None,
    )
    monkeypatch.setitem(registry.BACKENDS, "health", spec)
    yield f"http://127.0.0.1:{server.server_port}", _HealthServer.asked
    server.shutdown()
    server.server_close()


def test_a_backend_that_is_not_openai_compatible_is_checked_its_own_way(runtime, health_backend, monkeypatch):
    from dataclasses import replace

    url, asked = health_backend
    proposed = proposed_config(runtime.config, "executor", "health", url, "a-model", "a-key")
    role = proposed.role("executor")
    assert (role.base_url, role.model, role.api_key) == (url, "", "")  # the form's fields it does not take: cleared
    assert check_connection(role, runtime, "executor") == f"{url} is healthy."
    assert apply_role(runtime, proposed, "executor") == "The executor now uses scripted:health."
    assert asked == ["GET /health", "GET /health"]  # the test, then the check before applying: no chat request

    monkeypatch.setitem(registry.BACKENDS, "silent", replace(registry.BACKENDS["health"], name="silent",
                                                             connection_check=None))
    silent = proposed_config(runtime.config, "judge", "silent", url, "", "").role("judge")
    assert check_connection(silent, runtime, "judge") == ("The silent backend has no connection check; apply the "
                                                          "setting and ask a question to try it.")
    assert asked == ["GET /health", "GET /health"]


def test_the_backend_choices_are_the_registrys_when_the_page_is_built(runtime, health_backend):
    import gradio as gr

    from app.settings_tab import build_settings_tab

    with gr.Blocks() as page:
        build_settings_tab(AppContext(runtime))
    radio = next(block for block in page.blocks.values() if getattr(block, "elem_id", None) == "settings-backend")
    assert [value for _, value in radio.choices] == list(registry.BACKENDS) == ["llamacpp", "embedded", "openai", "health"]
