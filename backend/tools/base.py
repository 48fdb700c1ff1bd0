"""The contract every research tool keeps: named, described, JSON-schema arguments, a ToolResult back.

A tool never raises for bad arguments or for an unreachable resource: it answers ok=False with an
error sentence that tells the model (or the user) what a valid call looks like or what to do instead.
Even a failure nobody foresaw is such an answer, so one bad page or file never ends a whole run.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from backend.tools.text_ranking import relevant_excerpt

log = logging.getLogger(__name__)


@dataclass
class Passage:
    title: str
    text: str
    source: str  # "wiki:hotpotqa" | "wiki:vital" | "web" | "page" | "image-index"
    score: float
    url: str | None = None


@dataclass
class ToolResult:
    name: str
    arguments: dict
    ok: bool
    content: str  # what the model reads (length-capped, plain text)
    passages: list[Passage] = field(default_factory=list)  # evidence for the UI and citations
    error: str | None = None  # a sentence for the user/model when ok is False
    seconds: float = 0.0


@dataclass(frozen=True)
class ToolCapabilities:
    """What the research loop needs to know about a tool, declared by the tool instead of checked by
    its name anywhere else.

    `query_argument`: the list argument a guided turn fills with generated queries (None: a guided
    turn cannot write this tool's arguments). `needs_image`: offered only with an uploaded image, and
    always called on that image (a path written by the model never reaches the file system).
    `once_per_question`: a second call is refused (and costs the Executor's format reward).
    `captions_images`: its best result's title can stand in for an image caption.
    `per_namespace`: what it reads depends on whose question it is (e.g. a user's own documents);
    the tool then has `for_namespace(namespace) -> Tool`, and each run uses its caller's binding.
    `text_argument`: the one string argument a guided turn writes for a tool that gathers no
    evidence (a calculator's expression); such a tool is offered beside search, never forced.
    `links_pages`: its passages name pages it can return; the tool has `linked_page(question,
    passages) -> PageLink | None`, the named page a question's next hop most likely needs.
    `reads_documents`: bound to a caller, it also searches that caller's own documents."""

    query_argument: str | None = None
    text_argument: str | None = None
    needs_image: bool = False
    once_per_question: bool = False
    captions_images: bool = False
    per_namespace: bool = False
    links_pages: bool = False
    reads_documents: bool = False

    @property
    def gathers_evidence(self) -> bool:
        """It returns passages to read: it searches with queries or with the image."""
        return self.query_argument is not None or self.needs_image

    @property
    def guided(self) -> bool:
        """A guided turn can call it: it fills the query list or the text argument, or the image is the argument."""
        return self.gathers_evidence or self.text_argument is not None


@runtime_checkable
class Tool(Protocol):
    name: str
    description: str
    parameters: dict
    capabilities: ToolCapabilities

    def __call__(self, arguments: dict) -> ToolResult: ...


class ToolError(Exception):
    """An expected failure of a tool call; its message is the sentence shown to the model/user."""


class ToolSetupError(Exception):
    """A tool cannot be set up (e.g. a bad image folder); the message says what to fix."""


def string_list_schema(description: str, *, max_items: int) -> dict:
    return {
        "type": "array",
        "items": {"type": "string", "minLength": 1},
        "minItems": 1,
        "maxItems": max_items,
        "description": description,
    }


def example_arguments(parameters: dict) -> str:
    """A one-line JSON example of valid arguments, built from the schema (used in prompts and errors)."""
    example: dict[str, Any] = {}
    for name, spec in parameters.get("properties", {}).items():
        if spec.get("type") == "array":
            example[name] = [f"<{name.removesuffix('_list')} 1>", f"<{name.removesuffix('_list')} 2>"]
        else:
            example[name] = f"<{name}>"
    return json.dumps(example, ensure_ascii=False)


def argument_problems(parameters: dict, arguments: Any) -> list[str]:
    """What is wrong with `arguments` against the small JSON-schema subset our tools use."""
    if not isinstance(arguments, dict):
        return [f"arguments must be a JSON object, got {type(arguments).__name__}"]
    properties: dict = parameters.get("properties", {})
    problems = [f"missing argument {name!r}" for name in parameters.get("required", []) if name not in arguments]
    problems += [f"unknown argument {name!r}" for name in arguments if name not in properties]
    for name, spec in properties.items():
        if name in arguments:
            problems += _value_problems(name, spec, arguments[name])
    return problems


SCHEMA_TYPES = ("string", "integer", "number", "boolean", "array")


def schema_problems(parameters: Any) -> list[str]:
    """What in a tool's parameters schema the validation here cannot check (checked when tools are
    built, so that a call never meets a schema it cannot read)."""
    if not isinstance(parameters, dict) or not isinstance(parameters.get("properties", {}), dict):
        return ["parameters must be a JSON-schema object with a 'properties' object"]
    problems = []
    for name, spec in parameters.get("properties", {}).items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        if kind not in SCHEMA_TYPES:
            problems.append(f"argument {name!r} has type {kind!r}; use one of {', '.join(SCHEMA_TYPES)}")
        elif kind == "array" and spec.get("items", {"type": "string"}).get("type") not in SCHEMA_TYPES[:4]:
            problems.append(f"the items of {name!r} must be strings, integers, numbers or booleans")
    missing = [name for name in parameters.get("required", []) if name not in parameters.get("properties", {})]
    problems += [f"required argument {name!r} is not among the properties" for name in missing]
    return problems


def _value_problems(name: str, spec: dict, value: Any) -> list[str]:
    kind = spec.get("type")
    if kind == "string":
        if not isinstance(value, str) or len(value.strip()) < spec.get("minLength", 0):
            return [f"{name!r} must be a non-empty string"]
        return []
    if kind in ("integer", "number"):
        numeric = int if kind == "integer" else (int, float)
        if isinstance(value, bool) or not isinstance(value, numeric) or (isinstance(value, float) and not math.isfinite(value)):
            return [f"{name!r} must be {'an integer' if kind == 'integer' else 'a number'}, got {value!r:.40}"]
        low, high = spec.get("minimum"), spec.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            return [f"{name!r} must be from {low} to {high}, got {value}"]
        return []
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{name!r} must be true or false, got {value!r:.40}"]
    if kind == "array":
        items = spec.get("items", {"type": "string"})
        if not isinstance(value, list):
            return [f"{name!r} must be a list of {items.get('type')}s, got {type(value).__name__}"]
        if not spec.get("minItems", 0) <= len(value) <= spec.get("maxItems", len(value)):
            return [f"{name!r} must hold {spec.get('minItems', 0)} to {spec['maxItems']} items, got {len(value)}"]
        if items.get("type") == "string":
            if not all(isinstance(item, str) and item.strip() for item in value):
                return [f"every item of {name!r} must be a non-empty string"]
            return []
        return [problem for i, item in enumerate(value) for problem in _value_problems(f"{name}[{i}]", items, item)]
    return [f"{name!r} has a type this tool's schema does not support ({kind!r})"]


class BaseTool:
    """Validates arguments, times the call and turns a ToolError into an ok=False result.

    Subclasses set name, description, parameters and implement `run(arguments) -> (content, passages)`.
    """

    name: str
    description: str
    parameters: dict
    capabilities: ToolCapabilities = ToolCapabilities()

    def run(self, arguments: dict) -> tuple[str, list[Passage]]:
        raise NotImplementedError

    def __call__(self, arguments: dict) -> ToolResult:
        started = time.perf_counter()
        shown_arguments = arguments if isinstance(arguments, dict) else {"_invalid": repr(arguments)[:200]}
        problems = argument_problems(self.parameters, arguments)
        if problems:
            error = (
                f"Invalid arguments for `{self.name}`: {'; '.join(problems)}. "
                f"Call it like this: {example_arguments(self.parameters)}"
            )
            return self._failure(shown_arguments, error, started)
        try:
            content, passages = self.run(arguments)
        except ToolError as failure:
            return self._failure(shown_arguments, str(failure), started)
        except Exception as failure:  # a bug or an unforeseen input; logged in full, answered as a result
            log.exception("tool %s failed on %r", self.name, shown_arguments)
            error = (f"`{self.name}` failed unexpectedly ({type(failure).__name__}); "
                     "try different arguments or another tool.")
            return self._failure(shown_arguments, error, started)
        return ToolResult(
            name=self.name,
            arguments=shown_arguments,
            ok=True,
            content=content,
            passages=passages,
            error=None,
            seconds=time.perf_counter() - started,
        )

    def _failure(self, arguments: dict, error: str, started: float) -> ToolResult:
        return ToolResult(
            name=self.name,
            arguments=arguments,
            ok=False,
            content=f"Error: {error}",
            passages=[],
            error=error,
            seconds=time.perf_counter() - started,
        )


def offered_tools(tools: Mapping[str, Tool], *, has_image: bool, namespace: str | None = None) -> dict[str, Tool]:
    """The tools one question may use: a tool that needs an image only when one came with it, and a
    per-namespace tool bound to the caller's namespace (given one)."""
    offered = {}
    for name, tool in tools.items():
        if tool.capabilities.needs_image and not has_image:
            continue
        if tool.capabilities.per_namespace and namespace is not None:
            tool = tool.for_namespace(namespace)
        offered[name] = tool
    return offered


def query_tool(tools: Mapping[str, Tool]) -> Tool | None:
    """The first tool that takes generated queries (the local wiki search when offered)."""
    return next((t for t in tools.values() if t.capabilities.query_argument), None)


def once_per_question_tools(tools: Iterable[Tool]) -> frozenset[str]:
    return frozenset(tool.name for tool in tools if tool.capabilities.once_per_question)


def tool_prompt_lines(tools: Iterable[Tool]) -> str:
    """One line per tool: name, what it does, and a JSON example of its arguments."""
    return "\n".join(
        f"- {tool.name}: {tool.description} Arguments: {example_arguments(tool.parameters)}" for tool in tools
    )


def tool_names_line(tools: Iterable[Tool]) -> str:
    """Just the tool names: a planner needs no more, and small models copy descriptions into plans."""
    return ", ".join(tool.name for tool in tools)


def format_results_by_query(query_list: list[str], results: list[list[Passage]], *, text_limit: int) -> str:
    """'Results for "q":' then '[1] Title: text…' per passage, numbered across the whole call."""
    lines: list[str] = []
    number = 0
    for query, passages in zip(query_list, results, strict=True):
        lines.append(f'Results for "{query}":')
        if not passages:
            lines.append("(no matching passages; try other words or a more specific name)")
        for passage in passages:
            number += 1
            where = f" <{passage.url}>" if passage.url else ""
            lines.append(f"[{number}] {passage.title}{where}: {relevant_excerpt(passage.text, query, text_limit)}")
    return "\n".join(lines)
