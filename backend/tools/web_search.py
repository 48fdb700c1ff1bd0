"""The `web_search` tool: live web search through the `ddgs` metasearch package.

Offered only when web access is enabled. Without a network it fails fast with an error that points
the model back to the local `search` tool.
"""

from __future__ import annotations

from collections.abc import Callable

from backend.tools.base import BaseTool, Passage, ToolCapabilities, ToolError, format_results_by_query, string_list_schema

RESULTS_PER_QUERY = 3
MAX_QUERIES = 5
TEXT_LIMIT = 400
TIMEOUT_SECONDS = 4

# (query, max_results) -> ddgs-style hits: {"title", "href", "body"}
TextSearch = Callable[[str, int], list[dict]]


def ddgs_text_search(query: str, max_results: int) -> list[dict]:
    from ddgs import DDGS  # imported lazily: only web-enabled sessions need it

    return DDGS(timeout=TIMEOUT_SECONDS).text(query, max_results=max_results)


class WebSearchTool(BaseTool):
    name = "web_search"
    description = "Search the live web for each query; returns the top 3 results (title, link, snippet) per query."
    capabilities = ToolCapabilities(query_argument="query_list")
    parameters = {
        "type": "object",
        "properties": {"query_list": string_list_schema("web search queries", max_items=MAX_QUERIES)},
        "required": ["query_list"],
    }

    def __init__(self, text_search: TextSearch = ddgs_text_search) -> None:
        self.text_search = text_search

    def run(self, arguments: dict) -> tuple[str, list[Passage]]:
        query_list = [query.strip() for query in arguments["query_list"]]
        results = [self._search_one(query) for query in query_list]
        content = format_results_by_query(query_list, results, text_limit=TEXT_LIMIT)
        return content, [passage for passages in results for passage in passages]

    def _search_one(self, query: str) -> list[Passage]:
        try:
            hits = self.text_search(query, RESULTS_PER_QUERY)
        except Exception as failure:  # ddgs raises many kinds (DNS, TLS, rate limit, timeout, "no results")
            if "no results" in str(failure).lower():
                return []
            reason = " ".join(f"{type(failure).__name__}: {failure}".split())[:200]
            raise ToolError(f"web search is unreachable ({reason}); use the local `search` tool instead.") from failure
        return [
            Passage(
                title=str(hit.get("title") or hit.get("href") or "untitled"),
                text=str(hit.get("body") or ""),
                source="web",
                score=1.0 / rank,
                url=hit.get("href"),
            )
            for rank, hit in enumerate(hits[:RESULTS_PER_QUERY], start=1)
        ]
