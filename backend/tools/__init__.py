"""Research tools the Executor calls by name with JSON arguments.

`build_tools` (backend/tools/registry.py) assembles the set offered in one session from the names
`agent.tools` lists: the local wiki `search` (with the user's own documents beside the wiki when a
document store is given: backend/documents), `web_search` and `visit` when web access is enabled,
`image_search` when there are images to search (the `mia-demo-images` package, when installed, plus
the user's own folder), `calculate`, and tools of your own.
"""

from __future__ import annotations

from backend.tools.base import Passage, Tool, ToolError, ToolResult, ToolSetupError, tool_prompt_lines
from backend.tools.registry import build_tools

__all__ = ["Passage", "Tool", "ToolError", "ToolResult", "ToolSetupError", "build_tools", "tool_prompt_lines"]
