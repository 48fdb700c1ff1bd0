"""agent.tools: the tools by name, built in one place (backend/tools/registry.py) for the app, the
evaluation, training and verl; a name nobody registered is refused with the known names; a tool the
guided turns cannot call is reported when tools are built."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from backend.config import DEFAULT_TOOLS, REPO_ROOT, AgentConfig, ConfigError, LearningConfig, RoleConfig, load_config, with_overrides
from backend.events import ToolCalled
from backend.executor import ExecutorSession
from backend.metering import RunMeter
from backend.question import Question
from backend.tools import ToolSetupError, build_tools
from backend.tools.base import BaseTool, ToolCapabilities, offered_tools
from backend.tools.calculator import CalculatorTool
from backend.tools.image_index import demo_images_dir
from backend.tools.registry import TOOLS, ToolEntry, guided_turn_problems, tool_classes
from tests.backend.scripted_model import ScriptedChatModel

INDEX = REPO_ROOT / ".mia" / "test-cache" / "index"
IMAGES = ["image_search"] if demo_images_dir() else []  # the mia-demo-images package, when installed


class RoundTool(BaseTool):
    """A real tool a guided turn cannot write: a number and an integer."""

    name = "round"
    description = "Round a number to some decimal places."
    parameters = {"type": "object", "properties": {
        "value": {"type": "number"}, "places": {"type": "integer", "minimum": 0, "maximum": 6},
    }, "required": ["value", "places"]}

    def run(self, arguments):
        return str(round(arguments["value"], arguments["places"])), []


def test_the_default_list_is_the_tools_the_app_offered_before():
    assert AgentConfig().tools == DEFAULT_TOOLS == load_config(environ={}).agent.tools
    assert DEFAULT_TOOLS == ("search", "web_search", "visit", "image_search")
    # Before the list: the wiki search always, web search and page visits with web access, image
    # search with images to search, the calculator only when search.calculator asked for it.
    offline = build_tools(DEFAULT_TOOLS, cache_dir=INDEX, web_enabled=False, progress=False)
    online = build_tools(DEFAULT_TOOLS, cache_dir=INDEX, web_enabled=True, progress=False)
    assert list(offline) == ["search", *IMAGES]
    assert list(online) == ["search", "web_search", "visit", *IMAGES]
    assert set(TOOLS) == {*DEFAULT_TOOLS, "calculate"}


def test_the_list_is_built_in_its_order_and_read_from_the_file_and_the_environment(tmp_path):
    tools = build_tools(["calculate", "search"], cache_dir=INDEX, web_enabled=False, progress=False)
    assert list(tools) == ["calculate", "search"] and isinstance(tools["calculate"], CalculatorTool)
    path = tmp_path / "mia.toml"
    path.write_text('[agent]\ntools = ["search", "calculate"]\n', encoding="utf-8")
    assert load_config(path, environ={}).agent.tools == ("search", "calculate")
    assert load_config(environ={"MIA_AGENT_TOOLS": "calculate, search"}).agent.tools == ("calculate", "search")


def test_an_unknown_tool_is_refused_with_the_known_names(tmp_path):
    known = "known tools are search, web_search, visit, image_search, calculate"
    with pytest.raises(ConfigError, match=f"agent.tools: unknown tool 'calculator'; {known}"):
        load_config(environ={"MIA_AGENT_TOOLS": "search,calculator"})
    with pytest.raises(ConfigError, match="agent.tools: 'search' is listed twice"):
        load_config(environ={"MIA_AGENT_TOOLS": "search,search"})
    with pytest.raises(ToolSetupError, match=f"extra_info.tools: unknown tool 'nope'; {known}"):
        build_tools(["search", "nope"], cache_dir=INDEX, web_enabled=False, progress=False, key="extra_info.tools")
    path = tmp_path / "mia.toml"
    path.write_text("[search]\ncalculator = true\n", encoding="utf-8")
    with pytest.raises(ConfigError, match='search.calculator: the tools are a list now: add "calculate" to agent.tools'):
        load_config(path, environ={})


def test_a_tool_guided_turns_cannot_call_is_reported_when_tools_are_built(caplog):
    with caplog.at_level(logging.WARNING, logger="backend.tools.registry"):
        tools = build_tools(["search", "calculate"], cache_dir=INDEX, web_enabled=False, progress=False,
                            extra=[RoundTool()], guided=True)
    assert list(tools) == ["search", "calculate", "round"]  # still offered where turns are not guided
    (warning,) = caplog.records
    assert warning.levelno == logging.WARNING
    assert warning.getMessage().startswith("Tool 'round' is never offered in the Executor's guided turns")
    assert "its arguments are value (number), places (integer)" in warning.getMessage()
    assert "declare ToolCapabilities(text_argument=...)" in warning.getMessage()
    assert "take it out of agent.tools" in warning.getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="backend.tools.registry"):
        build_tools(["calculate"], cache_dir=INDEX, web_enabled=False, progress=False, extra=[RoundTool()], guided=False)
    assert caplog.records == []  # an Executor that writes its own calls can call it


def test_a_tool_of_your_own_is_one_registry_entry_and_its_name_in_the_list(monkeypatch, caplog):
    monkeypatch.setitem(TOOLS, "round", ToolEntry(RoundTool, lambda setup: RoundTool()))
    config = load_config(environ={"MIA_AGENT_TOOLS": "search,round"})
    with caplog.at_level(logging.WARNING, logger="backend.tools.registry"):
        tools = build_tools(config.agent.tools, cache_dir=INDEX, web_enabled=False, progress=False, guided=True)
    assert list(tools) == ["search", "round"] and tools["round"]({"value": 2.345, "places": 1}).content == "2.3"
    (warning,) = caplog.records
    assert warning.getMessage().startswith("Tool 'round' is never offered in the Executor's guided turns")


def test_a_declared_guided_argument_the_schema_does_not_match_is_reported():
    class MisdeclaredRound(RoundTool):
        capabilities = ToolCapabilities(text_argument="value")

    class PageVisit(BaseTool):  # two strings, as the web tools' visit takes
        name = "visit_page"
        description = "Read a page."
        parameters = {"type": "object", "properties": {"url": {"type": "string"}, "goal": {"type": "string"}},
                      "required": ["url", "goal"]}

    assert guided_turn_problems([CalculatorTool(), MisdeclaredRound()]) == [
        "Tool 'round' declares text_argument='value', but a guided turn writes only that argument, as one string, "
        "and its arguments are value (number), places (integer): make it the one required argument, a string, "
        "or declare no text_argument."]
    (problem,) = guided_turn_problems([PageVisit()])
    assert "its arguments are url (string), goal (string)" in problem


def test_the_reported_tool_is_indeed_never_among_a_guided_turns_options(shared_tools):
    class RecordingModel(ScriptedChatModel):
        def choose(self, messages, options, *, prefill=""):
            self.offered.append(list(options))
            return super().choose(messages, options, prefill=prefill)

    question = "How many years passed between the births of Marino Girolami and Daniel Myrick?"
    model = RecordingModel("executor", outputs=["Marino Girolami", "The years are 1914 and 1963", '1963 - 1914"',
                                                "subtract done", "49"], choices=["calculate", "answer"])
    model.offered = []
    tools = {"search": shared_tools["search"], "calculate": CalculatorTool(), "round": RoundTool()}
    session = ExecutorSession(model, tools, RunMeter(), "run", guided=True)
    session.start(Question.parse(question), [])
    called = [e.name for e in session.run(Question.parse(question), max_turns=4, deadline=float("inf")) if isinstance(e, ToolCalled)]
    assert called == ["search", "calculate"] and model.offered
    assert all("round" not in options and "calculate" in options for options in model.offered)


def test_prompts_name_the_listed_tools_without_building_them():
    assert [cls.name for cls in tool_classes(DEFAULT_TOOLS)] == ["search"]  # offline, a question without an image
    assert [cls.name for cls in tool_classes(DEFAULT_TOOLS, web_enabled=True)] == ["search", "web_search", "visit"]
    assert [cls.name for cls in tool_classes(["calculate"])] == ["calculate"]


@pytest.fixture
def runtime_with(tmp_path, tiny_model_dir):
    """build_runtime itself, every role on the tiny model, the wiki's BM25 index from the test cache."""
    from backend.runtime import build_runtime

    built = []

    def build(tools):
        data = tmp_path / f"data-{len(built)}"
        data.mkdir()
        (data / "index").symlink_to(INDEX)
        base = load_config(environ={})
        role = RoleConfig(backend="embedded", model_dir=str(tiny_model_dir), max_new_tokens=16)
        config = replace(base, data_dir=data, memory_url="", roles={name: role for name in base.roles},
                         search=replace(base.search, hybrid=False), ttrl=LearningConfig())
        built.append(build_runtime(with_overrides(config, tools=tools), progress=False, with_documents=False))
        return built[-1]

    yield build
    for runtime in built:
        runtime.close()


def test_a_tool_taken_out_of_the_list_is_not_offered_by_the_app(runtime_with):
    default = runtime_with(DEFAULT_TOOLS)
    assert list(offered_tools(default.agent.tools, has_image=False)) == ["search"]
    assert list(offered_tools(default.agent.tools, has_image=True)) == ["search", *IMAGES]
    without_images = runtime_with(("search", "calculate"))
    assert list(offered_tools(without_images.agent.tools, has_image=True)) == ["search", "calculate"]
