"""The `search` tool: several queries at once against the local sandbox Wikipedia."""

from __future__ import annotations

from backend.tools.base import BaseTool, Passage, ToolCapabilities, format_results_by_query, string_list_schema
from backend.tools.wiki_index import WikiIndex

PASSAGES_PER_QUERY = 3
MAX_QUERIES = 5
# What the Executor reads per paragraph: on a CPU every prompt token costs (~45 tok/s here); the
# reader is given whole paragraphs, chosen over the whole run, when it answers.
TEXT_LIMIT = 400


class WikiSearchTool(BaseTool):
    name = "search"
    description = (
        "Search the local Wikipedia for each query; returns the top 3 paragraphs per query. "
        "Use short, specific queries (names, titles, key terms)."
    )
    capabilities = ToolCapabilities(query_argument="query_list")
    parameters = {
        "type": "object",
        "properties": {"query_list": string_list_schema("search queries", max_items=MAX_QUERIES)},
        "required": ["query_list"],
    }

    def __init__(self, index: WikiIndex) -> None:
        self.index = index

    def run(self, arguments: dict) -> tuple[str, list[Passage]]:
        query_list = [query.strip() for query in arguments["query_list"]]
        results = self.index.search(query_list, k=PASSAGES_PER_QUERY)
        content = format_results_by_query(query_list, results, text_limit=TEXT_LIMIT)
        return content, [passage for passages in results for passage in passages]
