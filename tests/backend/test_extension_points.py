"""The two extension points docs/extending.md walks through, used as a new engineer would: a backend
added with one registry entry, and a tool that is not a search, offered to the default model's
guided turns."""

from __future__ import annotations


import pytest

from app.settings import role_rows
from backend.config import ConfigError, load_config
from backend.eval.spec import role_identity
from backend.events import ToolCalled, ToolReturned
from backend.executor import ExecutorSession
from backend.llm import registry
from backend.llm.registry import BackendSpec
from backend.metering import RunMeter
from backend.question import Question
from backend.runtime import make_chat_model
from backend.tools.calculator import CalculatorTool

from .scripted_model import ScriptedChatModel


@pytest.fixture
def echo_backend(monkeypatch):
    built = []

    def build(config, role, progress):
        built.append(role.model)
        return ScriptedChatModel(f"echo:{role.model}", outputs=["pong"])

    spec = BackendSpec(
        name="echo", settings={"model": "the name it echoes under"}, build=build,
        identity=lambda role: f"echo:{role.model}", model_label=lambda role: role.model, connection_check=None,
        trainable_weights=lambda config, role: None, planner_version=lambda config, role, version: None,
    )
    monkeypatch.setitem(registry.BACKENDS, "echo", spec)
    return built


def test_a_backend_added_to_the_registry_is_validated_built_recorded_and_listed(echo_backend, tmp_path):
    config = load_config(environ={"MIA_PLANNER_BACKEND": "echo", "MIA_PLANNER_MODEL": "parrot"})
    model = make_chat_model(config, "planner", progress=False)
    assert model.generate([{"role": "user", "content": "ping"}]).text == "pong" and echo_backend == ["parrot"]
    assert role_identity(config)["planner"] == "echo:parrot"
    assert ["planner", "echo", "-", "parrot"] == role_rows(config)[0][:4]
    with pytest.raises(ConfigError, match=r"roles.planner.base_url \(from MIA_PLANNER_BASE_URL\): the echo backend "
                                          r"does not take base_url; it takes backend, max_new_tokens, adapter, model "):
        load_config(environ={"MIA_PLANNER_BACKEND": "echo", "MIA_PLANNER_BASE_URL": "http://127.0.0.1:1/v1"})


def test_a_backend_nobody_registered_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"roles.planner.backend: must be one of llamacpp, embedded, openai, got 'nope'"):
        load_config(environ={"MIA_PLANNER_BACKEND": "nope"})


def test_a_tool_that_is_not_a_search_is_offered_in_guided_turns_and_never_forced(shared_tools):
    question = "How many years passed between the births of Marino Girolami and Daniel Myrick?"
    model = ScriptedChatModel(
        "executor",
        outputs=["Marino Girolami", "The years are 1914 and 1963", '1963 - 1914"', "subtract done", "49"],
        choices=["calculate", "answer"],
    )
    tools = {"search": shared_tools["search"], "calculate": CalculatorTool()}
    session = ExecutorSession(model, tools, RunMeter(), "run", guided=True)
    session.start(Question.parse(question), [])
    events = list(session.run(Question.parse(question), max_turns=4, deadline=float("inf")))

    called = [e for e in events if isinstance(e, ToolCalled)]
    assert [c.name for c in called] == ["search", "calculate"]  # the first turn must search: the calculator waits
    assert called[1].arguments == {"expression": "1963 - 1914"}
    returned = [e for e in events if isinstance(e, ToolReturned) and e.name == "calculate"]
    assert returned[0].ok and returned[0].content == "1963 - 1914 = 49"
    # The result is in the conversation the next turn is chosen from, and in the reader's evidence.
    assert "1963 - 1914 = 49" in "".join(m["content"] for m in model.prompts[-2])
    assert "Calculated: 1963 - 1914 = 49" in model.prompts[-1][-1]["content"]
    assert session.answer == "49"
