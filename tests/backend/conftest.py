"""Fixtures for agent-level tests: the real agent on the tiny random model, the real index, a fresh store."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from backend.config import RoleConfig, load_config


def agent_config(tmp_path: Path, model_dir: Path, **agent_overrides):
    """The repository config with every role on `model_dir`, caches shared, memory and runs in tmp."""
    base = load_config(environ={})
    role = RoleConfig(backend="embedded", model_dir=str(model_dir), max_new_tokens=48)
    agent = replace(base.agent, **{"max_turns": 2, "reflections": 1, **agent_overrides})
    return replace(
        base,
        data_dir=tmp_path,
        memory_url=f"sqlite:///{tmp_path / 'memory.sqlite'}",
        agent=agent,
        roles={name: role for name in base.roles},
    )


def scripted_config(tmp_path: Path, **agent_overrides):
    """The repository config for scripted models (no role loads a model): memory and runs in tmp, the
    Planner plans from the first question on."""
    from backend.config import RoleConfig

    base = load_config(environ={})
    agent = replace(base.agent, **{"sparse_memory_planner": "planner", "reflections": 1, **agent_overrides})
    return replace(base, data_dir=tmp_path, memory_url=f"sqlite:///{tmp_path / 'memory.sqlite'}", agent=agent,
                   roles={name: RoleConfig() for name in base.roles})


def make_agent(config, tools, embedder):
    from backend.agent import ResearchAgent
    from backend.runlog import RunLog
    from backend.runtime import make_chat_model
    from memory_db import MemoryStore

    models = {name: make_chat_model(config, name, progress=False) for name in config.roles}
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    return ResearchAgent(config, models=models, tools=tools, store=store, runlog=RunLog(config.runs_dir))


@pytest.fixture
def build_agent(shared_tools, embedder):
    """Factory: build_agent(tmp_path, model_dir, **agent_overrides) -> ResearchAgent (store closed after the test)."""
    agents = []

    def build(tmp_path: Path, model_dir: Path, **agent_overrides):
        agent = make_agent(agent_config(tmp_path, model_dir, **agent_overrides), shared_tools, embedder)
        agents.append(agent)
        return agent

    yield build
    for agent in agents:
        agent.store.close()


@pytest.fixture
def tiny_agent(tmp_path, tiny_model_dir, shared_tools, embedder):
    agent = make_agent(agent_config(tmp_path, tiny_model_dir), shared_tools, embedder)
    yield agent
    agent.store.close()


@pytest.fixture(scope="session")
def scripted_model_class():
    """ScriptedChatModel from tests/backend/scripted_model.py (tests are not an importable package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("scripted_model", Path(__file__).with_name("scripted_model.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ScriptedChatModel


@pytest.fixture
def larger_model_class(scripted_model_class):
    """A scripted model with a larger model's traits (it reads by quote and copies facts), recording
    each call's prefill."""
    class LargerScriptedModel(scripted_model_class):
        traits = replace(scripted_model_class.traits, small=False, executor_turns=4)

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.prefills: list[str] = []

        def generate(self, messages, **kwargs):
            self.prefills.append(kwargs.get("prefill", ""))
            return super().generate(messages, **kwargs)

        def choose(self, messages, options, *, prefill=""):
            self.prefills.append(prefill)
            return super().choose(messages, options, prefill=prefill)

    return LargerScriptedModel
