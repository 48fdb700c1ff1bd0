"""Struck web pages on the real web tools, a real local web site and the real memory store: a page
struck in a namespace (from a web search result or from a page read) is never a web search result
there again and `visit` does not read it (a short note instead of its text, a redirect to it too);
another namespace still gets it, and undoing the strike brings it back."""

from __future__ import annotations

import pytest

from backend.tools.base import Passage, offered_tools
from backend.tools.struck import StruckPages, passage_key
from backend.tools.visit import VisitTool
from backend.tools.web_search import RESULTS_PER_QUERY, WebSearchTool
from memory_db import MemoryStore

PAGES = {
    "/fyre": ("Fyre Festival hoax", "The Fyre Festival was held on Great Exuma in April 2017 and collapsed."),
    "/exuma": ("Great Exuma guide", "Great Exuma is the largest island of the Exuma district in the Bahamas."),
    "/bahamas": ("The Bahamas", "The Bahamas is a country of islands in the Atlantic Ocean."),
    "/george-town": ("George Town", "George Town is the capital of the Exuma district."),
    "/ferries": ("Exuma ferries", "Ferries leave George Town every morning for the cays."),
}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def memory(request, tmp_path):
    url = (f"sqlite:///{tmp_path / 'memory.sqlite'}" if request.param == "sqlite"
           else request.getfixturevalue("postgres_url"))
    store = MemoryStore(url)  # strikes need no embedder
    yield store
    store.close()


@pytest.fixture
def site(local_site):
    for path, (title, text) in PAGES.items():
        local_site.html(path, f"<html><head><title>{title}</title></head><body><p>{text}</p></body></html>")
    local_site.raw("/short", b"", {"Location": "/fyre"}, status=302)
    return local_site


class SiteSearch:
    """A search engine over the local site's pages, answering as ddgs.DDGS().text does (title, href,
    body; at most `max_results`), in the fixed order of PAGES; it records each request's size."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.asked: list[int] = []

    def __call__(self, query: str, max_results: int) -> list[dict]:
        self.asked.append(max_results)
        return [{"title": title, "href": self.base_url + path, "body": text}
                for path, (title, text) in PAGES.items()][:max_results]


def bound(tools: dict, namespace: str) -> dict:
    return offered_tools(tools, has_image=False, namespace=namespace)


def urls(tools: dict, namespace: str) -> list[str]:
    result = bound(tools, namespace)["web_search"]({"query_list": ["Fyre Festival Exuma"]})
    assert result.ok, result.error
    return [passage.url for passage in result.passages]


def test_a_struck_page_is_neither_found_nor_read_in_its_namespace_and_another_still_gets_it(site, memory):
    engine = SiteSearch(site.base_url)
    tools = {"web_search": WebSearchTool(engine, struck=memory.struck_keys),
             "visit": VisitTool(allow_private=True, timeout_seconds=3, struck=memory.struck_keys)}
    assert all(tool.capabilities.per_namespace for tool in tools.values())
    fyre = site.base_url + "/fyre"
    assert urls(tools, "alice")[0] == fyre and engine.asked[-1] == RESULTS_PER_QUERY

    read = bound(tools, "alice")["visit"]({"url": fyre, "goal": "where was the Fyre Festival"})
    assert read.ok and read.passages[0].source == "page"
    page = read.passages[0]
    memory.strike(passage_key(page), namespace="alice", title=page.title, source=page.source, url=page.url)

    found = bound(tools, "alice")["web_search"]({"query_list": ["Fyre Festival Exuma"]})
    assert [p.url for p in found.passages] == [site.base_url + path for path in ("/exuma", "/bahamas", "/george-town")]
    assert [p.score for p in found.passages] == [1.0, 0.5, 1.0 / 3], "ranked among what is returned"
    assert fyre not in found.content and engine.asked[-1] > RESULTS_PER_QUERY
    for address in (fyre, fyre + "#lineup", fyre.replace("http://", "HTTP://"), site.base_url + "/short"):
        again = bound(tools, "alice")["visit"]({"url": address, "goal": "where was the Fyre Festival"})
        assert again.ok and again.passages == [], address
        assert again.content.startswith("Not read: the analyst struck the page") and "Great Exuma" not in again.content

    assert urls(tools, "bob")[0] == fyre
    bob_read = bound(tools, "bob")["visit"]({"url": fyre, "goal": "where was the Fyre Festival"})
    assert bob_read.ok and "held on Great Exuma" in bob_read.content

    # a web search result struck as wrong is not read by visit either
    result = next(p for p in found.passages if p.url.endswith("/exuma"))
    memory.strike(passage_key(result), namespace="alice", title=result.title, source=result.source, url=result.url)
    assert result.url not in urls(tools, "alice")
    exuma = bound(tools, "alice")["visit"]({"url": result.url, "goal": "largest island"})
    assert exuma.passages == [] and "largest island" not in exuma.content

    memory.unstrike(passage_key(page), namespace="alice")
    assert fyre in urls(tools, "alice")
    assert "held on Great Exuma" in bound(tools, "alice")["visit"]({"url": fyre, "goal": "Fyre Festival"}).content


def test_struck_pages_are_read_from_their_keys():
    odd = Passage(title="A | title | with bars", text="", source="web", score=1.0, url="https://Example.org/a?b=1#top")
    long = Passage(title="Long", text="", source="page", score=1.0, url="https://example.org/" + "x" * 1200)
    wiki = {"title": "https://example.org/wiki", "source": "wiki:hotpotqa"}
    pages = StruckPages([passage_key(odd), passage_key(long), passage_key(wiki), "web|untitled"])
    assert pages.holds("https://example.org/a?b=1") and pages.holds("HTTPS://EXAMPLE.ORG/a?b=1#other")
    assert not pages.holds("https://example.org/a?b=2") and not pages.holds("https://example.org/wiki")
    # an address too long for its key is known by the whole key of what was struck
    assert passage_key(long).startswith("page|sha256:")
    assert pages.holds(long.url, long) and not pages.holds(long.url)
    assert len(pages) == 3 and not StruckPages([])
