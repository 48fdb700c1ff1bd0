"""Research tools the Executor calls by name with JSON arguments.

`build_tools` assembles the set offered in one session: the local wiki `search` always (with the
user's own documents beside the wiki when a document store is given: backend/documents), `web_search`
and `visit` only when web access is enabled, `image_search` when there are images to search (the
`mia-demo-images` package, when installed, plus the user's own folder), and tools of your own.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from backend.tools.base import Passage, Tool, ToolError, ToolResult, ToolSetupError, schema_problems, tool_prompt_lines
from backend.tools.image_index import ImageIndex, demo_images_dir
from backend.tools.image_search import ImageSearchTool
from backend.tools.search import WikiSearchTool
from backend.tools.visit import VisitTool
from backend.tools.web_search import WebSearchTool
from backend.tools.wiki_index import Embedder, WikiIndex

if TYPE_CHECKING:
    from backend.documents.store import DocumentStore

__all__ = ["Passage", "Tool", "ToolError", "ToolResult", "ToolSetupError", "build_tools", "tool_prompt_lines"]


def build_tools(
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
) -> dict[str, Tool]:
    """The research tools: the wiki search (with the user's documents), web search and page visits
    when online, image search, and `extra` tools of your own; every tool's schema is checked here.
    `struck(namespace)`: the keys of the sources struck as wrong in a namespace, which its searches
    leave out and its page visits do not read."""
    index = WikiIndex.load_or_build(Path(cache_dir), progress=progress, embedder=embedder,
                                    dense_in_background=dense_in_background)
    tools: list[Tool] = [WikiSearchTool(index, documents, struck=struck)]
    if web_enabled:
        tools += [WebSearchTool(struck=struck), VisitTool(allow_private=visit_allow_private, struck=struck)]
    image_folders = [folder for folder in (demo_images_dir(), image_index_dir) if folder is not None]
    if image_folders:
        missing = [folder for folder in image_folders if not Path(folder).is_dir()]
        if missing:
            raise ToolSetupError(f"image_index_dir {missing[0]} is not a folder; give a folder of images (and titles.json).")
        index = ImageIndex.load_or_build(image_folders, Path(cache_dir), progress=progress)
        tools.append(ImageSearchTool(index, min_similarity=image_min_similarity))
    tools += list(extra)
    for tool in tools:
        problems = schema_problems(tool.parameters)
        if problems:
            raise ToolSetupError(f"Tool {tool.name!r} has a parameters schema the tools cannot check: {'; '.join(problems)}.")
    return {tool.name: tool for tool in tools}
