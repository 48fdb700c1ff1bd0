import json

import pytest

from backend.config import REPO_ROOT
from backend.tools import ToolSetupError, build_tools
from backend.tools.base import BaseTool, Passage, ToolError, argument_problems, schema_problems, tool_prompt_lines
from backend.tools.text_ranking import shorten

SCHEMA = {
    "type": "object",
    "properties": {
        "query_list": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        "goal": {"type": "string", "minLength": 1},
    },
    "required": ["query_list"],
}


class EchoTool(BaseTool):
    name = "echo"
    description = "Repeats the queries."
    parameters = SCHEMA

    def run(self, arguments):
        if arguments["query_list"][0] == "fail":
            raise ToolError("the echo chamber is closed; try again later.")
        if arguments["query_list"][0] == "bug":
            return {}["no such key"]
        return " | ".join(arguments["query_list"]), [Passage("t", "x", "web", 1.0)]


def test_argument_problems_name_each_mistake():
    assert argument_problems(SCHEMA, {"query_list": ["a"]}) == []
    assert argument_problems(SCHEMA, "a") == ["arguments must be a JSON object, got str"]
    assert argument_problems(SCHEMA, {}) == ["missing argument 'query_list'"]
    assert argument_problems(SCHEMA, {"query_list": ["a"], "k": 3}) == ["unknown argument 'k'"]
    assert "must be a list of strings" in argument_problems(SCHEMA, {"query_list": "a"})[0]
    assert "1 to 2 items, got 3" in argument_problems(SCHEMA, {"query_list": ["a", "b", "c"]})[0]
    assert "1 to 2 items, got 0" in argument_problems(SCHEMA, {"query_list": []})[0]
    assert "non-empty string" in argument_problems(SCHEMA, {"query_list": ["a", "  "]})[0]
    assert "non-empty string" in argument_problems(SCHEMA, {"query_list": ["a"], "goal": 5})[0]


def test_a_bad_call_returns_an_error_with_a_valid_example_and_never_raises():
    tool = EchoTool()
    for bad in [{"query": "a"}, None, ["a"], {"query_list": [1]}]:
        result = tool(bad)
        assert not result.ok and result.passages == []
        assert "Call it like this:" in result.error
        example = json.loads(result.error.split("Call it like this: ")[1])
        assert tool(example).ok, "the example in the error is itself a valid call"
        assert result.content.startswith("Error: ")


def test_a_tool_error_becomes_ok_false_and_success_is_timed():
    tool = EchoTool()
    failed = tool({"query_list": ["fail"]})
    assert not failed.ok and failed.error == "the echo chamber is closed; try again later."
    done = tool({"query_list": ["a", "b"]})
    assert done.ok and done.content == "a | b" and done.error is None
    assert done.name == "echo" and done.arguments == {"query_list": ["a", "b"]}
    assert 0 <= done.seconds < 1


def test_an_unforeseen_failure_is_an_ok_false_result_too():
    result = EchoTool()({"query_list": ["bug"]})
    assert not result.ok and result.passages == []
    assert result.error == "`echo` failed unexpectedly (KeyError); try different arguments or another tool."


def test_prompt_lines_list_every_tool_with_an_example():
    lines = tool_prompt_lines([EchoTool()]).splitlines()
    assert lines == ['- echo: Repeats the queries. Arguments: {"query_list": ["<query 1>", "<query 2>"], "goal": "<goal>"}']


def test_shorten_cuts_at_a_word_and_marks_it():
    assert shorten("a  b\nc", 10) == "a b c"
    cut = shorten("word " * 50, 42)
    assert len(cut) <= 42 and cut.endswith("word…")


def test_a_long_passage_keeps_its_opening_and_the_sentences_that_match_the_query():
    from backend.tools.text_ranking import relevant_excerpt

    text = ("Tinted Windows is an American rock supergroup formed by Bun E. Carlos of Cheap Trick. "
            "Josh Lattanzi often performs with the band. The band recorded at Stratosphere Sound. "
            "The first performance by the band was in Tulsa, Oklahoma. It toured in 2009.")
    excerpt = relevant_excerpt(text, "Tinted Windows first performance", 160)
    assert excerpt.startswith("Tinted Windows is an American rock supergroup formed by Bun E. Carlos of Cheap Trick.")
    assert "The first performance by the band was in Tulsa, Oklahoma." in excerpt  # a plain cut would lose it
    assert "…" in excerpt and len(excerpt) <= 160
    assert relevant_excerpt("Short text.", "anything", 160) == "Short text."


class DaysBetweenTool(BaseTool):
    """A tool that is not a search: integer, number and boolean arguments."""

    name = "days_between"
    description = "Days between two years, optionally counting leap days."
    parameters = {"type": "object", "properties": {
        "first_year": {"type": "integer", "minimum": 1}, "second_year": {"type": "integer", "minimum": 1},
        "scale": {"type": "number"}, "leap_days": {"type": "boolean"},
    }, "required": ["first_year", "second_year"]}

    def run(self, arguments):
        days = abs(arguments["second_year"] - arguments["first_year"]) * 365 * arguments.get("scale", 1)
        return str(days), []


def test_integer_number_and_boolean_arguments_are_checked_and_never_raise():
    tool = DaysBetweenTool()
    assert tool({"first_year": 1990, "second_year": 2000, "scale": 0.5, "leap_days": True}).content == "1825.0"
    for bad, said in (({"first_year": "1990", "second_year": 2000}, "'first_year' must be an integer"),
                      ({"first_year": True, "second_year": 2000}, "'first_year' must be an integer"),
                      ({"first_year": 0, "second_year": 2000}, "'first_year' must be from 1"),
                      ({"first_year": 1990, "second_year": 2000, "scale": float("nan")}, "'scale' must be a number"),
                      ({"first_year": 1990, "second_year": 2000, "leap_days": "yes"}, "'leap_days' must be true or false")):
        result = tool(bad)
        assert not result.ok and said in result.error


def test_a_tool_whose_schema_cannot_be_checked_is_refused_when_tools_are_built():
    class ObjectArgumentTool(DaysBetweenTool):
        name = "nested"
        parameters = {"type": "object", "properties": {"options": {"type": "object"}}, "required": ["when"]}

    assert schema_problems(DaysBetweenTool.parameters) == []
    assert schema_problems(ObjectArgumentTool.parameters) == [
        "argument 'options' has type 'object'; use one of string, integer, number, boolean, array",
        "required argument 'when' is not among the properties"]
    cache = REPO_ROOT / ".mia" / "test-cache" / "index"
    tools = build_tools(cache_dir=cache, web_enabled=False, progress=False, extra=[DaysBetweenTool()])
    assert "days_between" in tools and "search" in tools
    with pytest.raises(ToolSetupError, match="Tool 'nested' has a parameters schema the tools cannot check"):
        build_tools(cache_dir=cache, web_enabled=False, progress=False, extra=[ObjectArgumentTool()])
