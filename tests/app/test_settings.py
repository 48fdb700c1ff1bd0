"""Settings: validation, test connection against a real local OpenAI-compatible server, apply."""

from __future__ import annotations

import socket

import pytest

from app.settings import apply_role, proposed_config, role_rows, test_connection as check_connection
from backend.agent import RunRequest
from backend.config import ConfigError
from backend.llm.serve import start_server_in_thread


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
        assert check_connection(good.role("executor"), runtime, "executor").startswith("Connected to tiny")
    finally:
        stop()
    down = proposed_config(runtime.config, "executor", "openai", closed_port_url(), "tiny", "")
    message = check_connection(down.role("executor"), runtime, "executor")
    assert message.startswith("Connection failed:") and "127.0.0.1" in message
    assert "Embedded model answered" in check_connection(runtime.config.role("judge"), runtime, "judge")


def test_apply_switches_one_role_in_the_running_agent(runtime, tiny_chat_model):
    url, stop = start_server_in_thread(tiny_chat_model, served_model_name="tiny")
    try:
        new = proposed_config(runtime.config, "planner", "openai", url, "tiny", "")
        message = apply_role(runtime, new, "planner")
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
        apply_role(runtime, new, "planner")
    assert runtime.agent.models["planner"] is before
    assert runtime.config.role("planner").backend == "embedded"
