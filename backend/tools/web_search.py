"""The `web_search` tool: live web search through the `ddgs` metasearch package.

Offered only when web access is enabled. Without a network it fails fast with an error that points
the model back to the local `search` tool. Bound to a caller's namespace, it never returns a page
struck as wrong there (backend.tools.struck), reading further down the results to fill the top 3.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace

from backend.tools.base import BaseTool, Passage, ToolCapabilities, ToolError, format_results_by_query, string_list_schema
from backend.tools.struck import StruckPages

RESULTS_PER_QUERY = 3
MAX_QUERIES = 5
TEXT_LIMIT = 400
TIMEOUT_SECONDS = 4
MAX_STRUCK_DEPTH = 7  # how many results past the top 3 a search asks for to make up for struck pages

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

    def __init__(self, text_search: TextSearch = ddgs_text_search, *,
                 struck: Callable[[str], Collection[str]] | None = None, struck_keys: Collection[str] = ()) -> None:
        """`struck(namespace)`: the keys of the sources struck in a namespace (MemoryStore.struck_keys);
        `struck_keys`: those of the namespace this search is bound to."""
        self.text_search = text_search
        self.struck = struck
        self.struck_pages = StruckPages(struck_keys)
        if struck is not None:
            self.capabilities = ToolCapabilities(query_argument="query_list", per_namespace=True)

    def for_namespace(self, namespace: str) -> WebSearchTool:
        """This search for one caller: without the pages struck in `namespace`."""
        return WebSearchTool(self.text_search, struck_keys=self.struck(namespace) if self.struck is not None else ())

    def run(self, arguments: dict) -> tuple[str, list[Passage]]:
        query_list = [query.strip() for query in arguments["query_list"]]
        results = [self._search_one(query) for query in query_list]
        content = format_results_by_query(query_list, results, text_limit=TEXT_LIMIT)
        return content, [passage for passages in results for passage in passages]

    def _search_one(self, query: str) -> list[Passage]:
        try:
            hits = self.text_search(query, RESULTS_PER_QUERY + min(len(self.struck_pages), MAX_STRUCK_DEPTH))
        except Exception as failure:  # ddgs raises many kinds (DNS, TLS, rate limit, timeout, "no results")
            if "no results" in str(failure).lower():
                return []
            reason = " ".join(f"{type(failure).__name__}: {failure}".split())[:200]
            raise ToolError(f"web search is unreachable ({reason}); use the local `search` tool instead.") from failure
        found = [Passage(title=str(hit.get("title") or hit.get("href") or "untitled"), text=str(hit.get("body") or ""),
                         source="web", score=0.0, url=hit.get("href")) for hit in hits]
        kept = [passage for passage in found if not self.struck_pages.holds(passage.url, passage)]
        return [replace(passage, score=1.0 / rank) for rank, passage in enumerate(kept[:RESULTS_PER_QUERY], start=1)]
