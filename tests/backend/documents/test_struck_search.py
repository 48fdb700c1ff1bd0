"""Struck sources on the real search and the real memory store: a passage struck in a namespace is
never returned to it again (whatever the query, and not through a followed link either), another
namespace still gets it, and undoing the strike brings it back."""

from __future__ import annotations

import pytest

from backend.tools.base import offered_tools
from backend.tools.search import WikiSearchTool
from backend.tools.struck import passage_key
from memory_db import MemoryStore

from .conftest import FACT

ARTICLE = "Arthur's Magazine"
WIKI_QUERIES = ["Arthur's Magazine", "Arthur's Magazine American literary periodical", "magazine founded 1844 Philadelphia"]


@pytest.fixture
def memory(tmp_path, embedder):
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    yield store
    store.close()


def titles(tool, namespace: str, queries: list[str]) -> list[str]:
    result = offered_tools({"search": tool}, has_image=False, namespace=namespace)["search"]({"query_list": queries})
    assert result.ok
    return [passage.title for passage in result.passages]


def test_a_struck_wiki_article_never_comes_back_in_its_namespace_and_another_still_sees_it(wiki_search, memory):
    tool = WikiSearchTool(wiki_search.index, struck=memory.struck_keys)
    assert tool.capabilities.per_namespace
    before = tool.for_namespace("alice")({"query_list": WIKI_QUERIES})
    found = next(p for p in before.passages if p.title == ARTICLE)
    assert passage_key(found) == f"{found.source}|{ARTICLE}"

    memory.strike(passage_key(found), namespace="alice", title=ARTICLE, source=found.source)
    after = tool.for_namespace("alice")({"query_list": WIKI_QUERIES})
    assert ARTICLE not in [p.title for p in after.passages] and f"] {ARTICLE}:" not in after.content
    assert all(len(after.passages[i * 3:(i + 1) * 3]) == 3 for i in range(len(WIKI_QUERIES))), "the next best fill in"
    assert ARTICLE in titles(tool, "bob", WIKI_QUERIES)

    # A page that names the struck article does not lead back to it.
    naming = [{"title": "Magazine list", "source": "wiki:hotpotqa", "text": f"{ARTICLE} was a periodical."}]
    linked = tool.for_namespace("alice").linked_page("Who edited it?", naming)
    assert linked is None or linked.title != ARTICLE
    assert tool.for_namespace("bob").linked_page("Who edited it?", naming).title == ARTICLE

    memory.unstrike(passage_key(found), namespace="alice")
    assert ARTICLE in titles(tool, "alice", WIKI_QUERIES)


def test_a_struck_document_passage_is_left_out_of_its_namespace_only(wiki_search, store, memory, sample_dir):
    for namespace in ("alice", "bob"):
        store.add_paths(namespace, "samples", [sample_dir])
    tool = WikiSearchTool(wiki_search.index, store, struck=memory.struck_keys)
    question = ["When was the Quillmoor reactor commissioned?"]
    first = tool.for_namespace("alice")(({"query_list": question})).passages[0]
    assert first.text.startswith(FACT)
    key = passage_key(first)
    assert key.startswith(f"{first.url}|") and len(key.rsplit("|", 1)[1]) == 12

    memory.strike(key, namespace="alice", title=first.title, source=first.source, url=first.url)
    assert all(not p.text.startswith(FACT) for p in tool.for_namespace("alice")({"query_list": question}).passages)
    assert tool.for_namespace("bob")({"query_list": question}).passages[0].text.startswith(FACT)
    # re-indexing the file keeps the passage's key: it stays struck
    store.reindex("alice", "samples")
    assert all(not p.text.startswith(FACT) for p in tool.for_namespace("alice")({"query_list": question}).passages)
