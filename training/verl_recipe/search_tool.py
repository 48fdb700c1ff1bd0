"""Our local-wiki `search` tool as a verl tool (declared in config/tools.yaml).

verl creates one instance per rollout worker; the BM25 index is loaded once per process from
``config.index_cache_dir`` (built on first use) and shared by every trajectory.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from backend.tools.registry import build_tools
from backend.tools.search import WikiSearchTool


@functools.cache
def _search_tool(index_cache_dir: str) -> WikiSearchTool:
    return build_tools(("search",), cache_dir=Path(index_cache_dir), web_enabled=False, progress=False)["search"]


def openai_schema() -> OpenAIFunctionToolSchema:
    """The schema verl shows the model, from the tool's own name, description and arguments."""
    query_list = WikiSearchTool.parameters["properties"]["query_list"]
    return OpenAIFunctionToolSchema.model_validate({
        "type": "function",
        "function": {
            "name": WikiSearchTool.name,
            "description": WikiSearchTool.description,
            "parameters": {
                "type": "object",
                "properties": {"query_list": {"type": "array", "description": query_list["description"]}},
                "required": ["query_list"],
            },
        },
    })


class MiaWikiSearchTool(BaseTool):
    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        if not config.get("index_cache_dir"):
            raise ValueError("MiaWikiSearchTool needs config.index_cache_dir (a folder for the wiki index) in tools.yaml.")
        super().__init__(config, tool_schema or openai_schema())
        self.index_cache_dir = str(config["index_cache_dir"])

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs) -> tuple[ToolResponse, float, dict]:
        result = _search_tool(self.index_cache_dir)(parameters)
        text = result.content if result.ok else f"Error: {result.error}"
        return ToolResponse(text=text), 0.0, {"ok": result.ok, "passages": len(result.passages)}
