"""The same agent configuration pointed at an OpenAI-compatible server: every role over HTTP."""

from __future__ import annotations

from dataclasses import replace

from backend.agent import ResearchAgent, RunRequest
from backend.config import RoleConfig, load_config
from backend.events import (
    ExecutorThought,
    MemoryStored,
    PlanReady,
    RunFailed,
    RunFinished,
    ToolReturned,
    VerdictReady,
)
from backend.llm.serve import start_server_in_thread
from backend.runlog import RunLog
from backend.runtime import make_chat_model
from memory_db import MemoryStore

QUESTION = 'The band who released the debut album "Tinted Windows" had their first performance in what city?'


def served_config(tmp_path, base_url: str, small: str = "auto", **agent):
    base = load_config(environ={})
    role = RoleConfig(backend="openai", base_url=base_url, model="tiny", max_new_tokens=32, timeout_s=60, small=small)
    return replace(
        base,
        data_dir=tmp_path,
        memory_url=f"sqlite:///{tmp_path / 'memory.sqlite'}",
        agent=replace(base.agent, max_turns=2, **agent),
        roles={name: role for name in base.roles},
    )


def test_every_role_on_a_served_model_runs_the_whole_loop(tmp_path, tiny_chat_model, shared_tools, embedder):
    requests: list[dict] = []
    base_url, stop = start_server_in_thread(tiny_chat_model, served_model_name="tiny", request_log=requests)
    try:
        config = served_config(tmp_path, base_url)
        models = {name: make_chat_model(config, name) for name in config.roles}
        assert config.agent.turns_for(models["executor"].traits) == 2
        assert not config.agent.guided_for(models["executor"].traits)  # served models write the protocol freely
        assert all(m.name.startswith("openai:") for m in models.values())
        store = MemoryStore(config.resolved_memory_url, embedder=embedder)
        agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
        events = list(agent.run(RunRequest(QUESTION, ground_truth="Tulsa")))
        assert isinstance(events[-1], RunFinished), [e.to_dict() for e in events if isinstance(e, RunFailed)]
        assert any(isinstance(e, PlanReady) for e in events)
        assert any(isinstance(e, ToolReturned) and e.passages for e in events)
        assert any(isinstance(e, VerdictReady) for e in events)
        stored = next(e for e in events if isinstance(e, MemoryStored))
        assert store.get(stored.memory_id, namespace="default").provenance["models"]["planner"].startswith("openai:")
        assert len(requests) >= 4  # every role went over HTTP
        store.close()
    finally:
        stop()


def test_an_unreachable_server_fails_the_run_with_a_clear_message(tmp_path, shared_tools, embedder):
    config = served_config(tmp_path, "http://127.0.0.1:9/v1")
    models = {name: make_chat_model(config, name) for name in config.roles}
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
    events = list(agent.run(RunRequest(QUESTION)))
    assert isinstance(events[-1], RunFailed)
    assert "127.0.0.1:9" in events[-1].message
    assert store.count(namespace="default") == 0
    store.close()


def test_guided_turns_on_a_served_model_send_at_most_four_stop_strings(tmp_path, tiny_chat_model, shared_tools,
                                                                      embedder):
    """vLLM and OpenAI answer HTTP 400 to a fifth stop string (the local server does the same); a small
    model's guided thought has five, so the rest are applied on the client."""
    requests: list[dict] = []
    base_url, stop = start_server_in_thread(tiny_chat_model, served_model_name="tiny", request_log=requests)
    try:
        config = served_config(tmp_path, base_url, small="true", guided_actions="on")
        models = {name: make_chat_model(config, name) for name in config.roles}
        store = MemoryStore(config.resolved_memory_url, embedder=embedder)
        agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
        events = list(agent.run(RunRequest(QUESTION, method="none", ground_truth="Tulsa")))
        assert isinstance(events[-1], RunFinished), [e.to_dict() for e in events if isinstance(e, RunFailed)]
        thoughts = [e for e in events if isinstance(e, ExecutorThought)]
        assert thoughts and all("\n" not in t.text and "<tool_call>" not in t.text for t in thoughts)
        assert max(len(r.get("stop") or []) for r in requests) == 4
        generations = [r for r in requests if r.get("max_tokens", 0) > 1 and "guided_choice" not in r]
        assert generations and all(r["repetition_penalty"] == 1.1 for r in generations)
        store.close()
    finally:
        stop()
