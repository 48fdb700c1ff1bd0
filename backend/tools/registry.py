"""Every tool by the name `agent.tools` lists it under, and how it is built: the one place the app,
the evaluation, offline training and the verl recipe get their tools from.

A name in the list is built in the list's order when this setup can offer it: `web_search` and
`visit` only with web access (`search.web`), `image_search` only where there are images to search
(the `mia-demo-images` package, when installed, plus the user's own folder). Every tool's schema is
checked as it is built, and a tool that the Executor's guided turns (the local models') could not
call is reported then, with what to change (`guided_turn_problems`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from backend.config import DEFAULT_TOOLS
from backend.tools.base import Tool, ToolSetupError, schema_problems
from backend.tools.calculator import CalculatorTool
from backend.tools.image_index import ImageIndex, demo_images_dir
from backend.tools.image_search import ImageSearchTool
from backend.tools.search import WikiSearchTool
from backend.tools.visit import VisitTool
from backend.tools.web_search import WebSearchTool
from backend.tools.wiki_index import Embedder, WikiIndex

if TYPE_CHECKING:
    from backend.documents.store import DocumentStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolSetup:
    """What the builders may read; each reads only its own part."""

    cache_dir: Path | None = None  # holds the wiki's and the images' indexes (None: only what needs no index)
    web_enabled: bool = False  # search.web
    progress: bool = True
    embedder: Embedder | None = None  # hybrid wiki search (search.hybrid)
    visit_allow_private: bool = False
    image_index_dir: Path | None = None
    image_min_similarity: float = 0.0
    dense_in_background: bool = False
    documents: DocumentStore | None = None
    struck: Callable[[str], Collection[str]] | None = None  # a namespace's struck keys, which its tools leave out

    def image_folders(self) -> list[Path]:
        return [Path(folder) for folder in (demo_images_dir(), self.image_index_dir) if folder is not None]


@dataclass(frozen=True)
class ToolEntry:
    """`cls`: the tool's class, whose name, description, arguments and capabilities prompts read
    without building it. `unavailable(setup)`: why this setup cannot offer it (None: it can)."""

    cls: type
    build: Callable[[ToolSetup], Tool]
    unavailable: Callable[[ToolSetup], str | None] = lambda setup: None


def _wiki_search(setup: ToolSetup) -> Tool:
    index = WikiIndex.load_or_build(setup.cache_dir, progress=setup.progress, embedder=setup.embedder,
                                    dense_in_background=setup.dense_in_background)
    return WikiSearchTool(index, setup.documents, struck=setup.struck)


def _image_search(setup: ToolSetup) -> Tool:
    folders = setup.image_folders()
    missing = [folder for folder in folders if not folder.is_dir()]
    if missing:
        raise ToolSetupError(f"image_index_dir {missing[0]} is not a folder; give a folder of images (and titles.json).")
    index = ImageIndex.load_or_build(folders, setup.cache_dir, progress=setup.progress)
    return ImageSearchTool(index, min_similarity=setup.image_min_similarity)


def _needs_web(setup: ToolSetup) -> str | None:
    return None if setup.web_enabled else "web access is off (search.web = false)"


def _needs_images(setup: ToolSetup) -> str | None:
    return None if setup.image_folders() else "there are no images to search (no mia-demo-images, no image folder)"


TOOLS: dict[str, ToolEntry] = {
    "search": ToolEntry(WikiSearchTool, _wiki_search),
    "web_search": ToolEntry(WebSearchTool, lambda setup: WebSearchTool(struck=setup.struck), _needs_web),
    "visit": ToolEntry(VisitTool, lambda setup: VisitTool(allow_private=setup.visit_allow_private, struck=setup.struck),
                       _needs_web),
    "image_search": ToolEntry(ImageSearchTool, _image_search, _needs_images),
    "calculate": ToolEntry(CalculatorTool, lambda setup: CalculatorTool()),
}


def unknown_tool_problem(names: Iterable[str], key: str = "agent.tools") -> str | None:
    """The sentence refusing the first name no tool has, or None."""
    unknown = [name for name in names if name not in TOOLS]
    if not unknown:
        return None
    return (f"{key}: unknown tool {unknown[0]!r}; known tools are {', '.join(TOOLS)}. A tool of your own needs "
            "its entry in TOOLS (backend/tools/registry.py) first.")


def _available(names: Sequence[str], setup: ToolSetup, key: str) -> list[str]:
    problem = unknown_tool_problem(names, key)
    if problem:
        raise ToolSetupError(problem)
    available = []
    for name in names:
        reason = TOOLS[name].unavailable(setup)
        if reason is None:
            available.append(name)
        else:
            log.info("%s names %r, which is not offered here: %s.", key, name, reason)
    return available


def tool_classes(names: Sequence[str], *, web_enabled: bool = False, image_index_dir: Path | None = None,
                 key: str = "agent.tools", with_image: bool = False) -> list[type]:
    """The classes of the tools `names` would build, for prompts that read only their name,
    description and arguments (no index is loaded); `with_image=False`: as offered to a question
    without an image."""
    setup = ToolSetup(web_enabled=web_enabled, image_index_dir=image_index_dir)
    classes = [TOOLS[name].cls for name in _available(names, setup, key)]
    return [cls for cls in classes if with_image or not cls.capabilities.needs_image]


def build_tools(
    names: Sequence[str] = DEFAULT_TOOLS,
    *,
    cache_dir: Path,
    web_enabled: bool,
    progress: bool = True,
    embedder: Embedder | None = None,
    visit_allow_private: bool = False,
    image_index_dir: Path | None = None,
    image_min_similarity: float = 0.0,
    dense_in_background: bool = False,
    documents: DocumentStore | None = None,
    struck: Callable[[str], Collection[str]] | None = None,
    extra: Iterable[Tool] = (),
    key: str = "agent.tools",
    guided: bool = False,
) -> dict[str, Tool]:
    """The tools `names` (the setting `key`) this setup can offer, in their order, then `extra` tools
    of your own; every tool's schema is checked. `struck(namespace)`: the keys of the sources struck
    as wrong in a namespace, which its searches leave out and its page visits do not read. `guided`: the Executor's turns are guided, so
    each tool they cannot call is logged as a warning with what to change."""
    setup = ToolSetup(cache_dir=Path(cache_dir), web_enabled=web_enabled, progress=progress, embedder=embedder,
                      visit_allow_private=visit_allow_private, image_index_dir=image_index_dir,
                      image_min_similarity=image_min_similarity, dense_in_background=dense_in_background,
                      documents=documents, struck=struck)
    tools = [TOOLS[name].build(setup) for name in _available(names, setup, key)] + list(extra)
    for tool in tools:
        problems = schema_problems(tool.parameters)
        if problems:
            raise ToolSetupError(f"Tool {tool.name!r} has a parameters schema the tools cannot check: {'; '.join(problems)}.")
    if guided:
        for problem in guided_turn_problems(tools):
            log.warning(problem)
    return {tool.name: tool for tool in tools}


def _arguments(parameters: dict) -> str:
    properties = parameters.get("properties", {})
    return ", ".join(f"{name} ({spec.get('type')})" for name, spec in properties.items()) or "none"


def guided_turn_problems(tools: Iterable[Tool]) -> list[str]:
    """One sentence per tool the Executor's guided turns (local models: agent.guided_actions) cannot
    call, saying why and what to change. A guided turn fills a list of queries (`query_argument`),
    one string argument (`text_argument`) or the question's image (`needs_image`), and nothing else."""
    problems = []
    for tool in tools:
        capabilities, parameters = tool.capabilities, tool.parameters
        properties, required = parameters.get("properties", {}), set(parameters.get("required", []))
        arguments = _arguments(parameters)
        if capabilities.query_argument is not None:
            spec = properties.get(capabilities.query_argument, {})
            if spec.get("type") != "array" or spec.get("items", {"type": "string"}).get("type") != "string" \
                    or required - {capabilities.query_argument}:
                problems.append(
                    f"Tool {tool.name!r} declares query_argument={capabilities.query_argument!r}, but a guided turn "
                    f"writes only that argument, as a list of strings, and its arguments are {arguments}: make it the "
                    "one required argument, a list of strings, or declare no query_argument.")
        elif capabilities.text_argument is not None:
            spec = properties.get(capabilities.text_argument, {})
            if spec.get("type") != "string" or required - {capabilities.text_argument}:
                problems.append(
                    f"Tool {tool.name!r} declares text_argument={capabilities.text_argument!r}, but a guided turn "
                    f"writes only that argument, as one string, and its arguments are {arguments}: make it the one "
                    "required argument, a string, or declare no text_argument.")
        elif not capabilities.needs_image:
            problems.append(
                f"Tool {tool.name!r} is never offered in the Executor's guided turns (agent.guided_actions, on for "
                f"local models): they write a list of queries or one string argument, and its arguments are "
                f"{arguments}. Give it one string argument and declare ToolCapabilities(text_argument=...) (or a "
                "list of queries: query_argument=...), take it out of agent.tools, or use an Executor that writes "
                'its own calls (agent.guided_actions = "off", a served model).')
    return problems
