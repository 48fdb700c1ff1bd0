"""The `search` tool with documents: bound per run to the caller's namespace, the wiki's and the
documents' rankings fused by rank, each result labelled with its source; with no documents (or
none matching) exactly the wiki's output, which the evaluation relies on."""

from __future__ import annotations

import re

from backend.documents import DocumentStore
from backend.tools import build_tools
from backend.tools.base import Passage, offered_tools, tool_prompt_lines
from backend.tools.search import WIKI_DESCRIPTION, WikiSearchTool, fuse_by_rank

from .conftest import FACT

QUERIES = {"query_list": ["Fyre Festival", "Kevin Loader film producer", "Arthur's Magazine"]}


def searched(tool, namespace, arguments=QUERIES):
    return tool.for_namespace(namespace)(arguments)


def test_with_no_documents_the_output_is_exactly_the_wikis(wiki_search, store, sample_dir):
    plain = WikiSearchTool(wiki_search.index)({**QUERIES})
    tool = WikiSearchTool(wiki_search.index, store)
    assert tool.capabilities.per_namespace and not wiki_search.capabilities.per_namespace
    empty = searched(tool, "alice")
    assert empty.content == plain.content and empty.passages == plain.passages
    assert tool.for_namespace("alice").description == WIKI_DESCRIPTION
    store.add_paths("bob", "samples", [sample_dir])  # someone else's documents change nothing for alice
    assert searched(tool, "alice").content == plain.content
    assert tool_prompt_lines([tool.for_namespace("alice")]) == tool_prompt_lines([wiki_search])


def test_queries_no_document_matches_keep_the_wikis_results(wiki_search, store, sample_dir):
    store.add_paths("alice", "samples", [sample_dir])
    plain = WikiSearchTool(wiki_search.index)({**QUERIES})
    result = searched(WikiSearchTool(wiki_search.index, store), "alice")
    assert result.content == plain.content, "no document matches these queries, so nothing changes"


def test_a_document_passage_wins_for_a_question_only_it_answers(wiki_search, store, sample_dir):
    store.add_paths("alice", "samples", [sample_dir])
    tool = WikiSearchTool(wiki_search.index, store)
    bound = tool.for_namespace("alice")
    assert "the user's own documents" in bound.description
    result = bound({"query_list": ["When was the Quillmoor reactor commissioned?", "Fyre Festival"]})
    assert result.ok
    first = result.passages[0]
    assert (first.title, first.source, first.url) == ("notes/reactors.md § Reactors", "doc:samples",
                                                      "doc://samples/notes/reactors.md#section=Reactors")
    assert first.text.startswith(FACT)
    lines = result.content.splitlines()
    assert lines[0] == 'Results for "When was the Quillmoor reactor commissioned?":'
    assert lines[1].startswith("[1] notes/reactors.md § Reactors <doc://samples/notes/reactors.md#section=Reactors>: "
                               "The Quillmoor reactor was commissioned in 1987")
    first_query = result.passages[:3]
    assert any(p.source.startswith("wiki:") for p in first_query), "the wiki keeps its place beside the documents"
    assert [int(n) for n in re.findall(r"^\[(\d+)\]", result.content, re.M)] == list(range(1, 7))
    second = result.passages[3:]
    assert second == WikiSearchTool(wiki_search.index)({"query_list": ["Fyre Festival"]}).passages


def test_equal_ranks_go_to_the_passage_that_matches_the_query_better():
    def passage(title, text, source):
        return Passage(title=title, text=text, source=source, score=1.0)

    wiki = [passage("Orchard", "Pears grow in the orchard.", "wiki:vital"),
            passage("Fruit", "Fruit is sweet.", "wiki:vital")]
    documents = [passage("notes.md", "Our apple orchard: apple trees, apple harvest.", "doc:notes")]
    fused = fuse_by_rank("apple orchard", wiki, documents, k=3)
    assert [p.title for p in fused] == ["notes.md", "Orchard", "Fruit"]  # rank 1 of both, the better match first
    fused = fuse_by_rank("pears orchard", wiki, documents, k=2)
    assert [p.title for p in fused] == ["Orchard", "notes.md"]
    assert fuse_by_rank("apple", wiki, [], k=3) == wiki


def test_a_bm25_only_store_is_fused_the_same_way(wiki_search, tmp_path):
    plain = DocumentStore(tmp_path / "bm25-only")  # no embedder: documents by BM25 alone
    (tmp_path / "festival.md").write_text(
        "# Notes\n\nOur notes on the Fyre Festival fraud in the Bahamas.\n", encoding="utf-8")
    plain.add_paths("alice", "notes", [tmp_path / "festival.md"])
    result = WikiSearchTool(wiki_search.index, plain).for_namespace("alice")({"query_list": ["Fyre Festival"]})
    sources = [p.source for p in result.passages]
    assert len(sources) == 3 and sources.count("doc:notes") == 1 and "doc:notes" in sources[:2]
    assert sources[2].startswith("wiki:"), "rank 1 of both lists first, then the wiki's second"


def test_build_tools_binds_the_search_to_each_runs_namespace(wiki_cache_dir_shared, store, sample_dir):
    tools = build_tools(cache_dir=wiki_cache_dir_shared, web_enabled=False, progress=False, documents=store)
    store.add_paths("alice", "samples", [sample_dir])
    alices = offered_tools(tools, has_image=False, namespace="alice")["search"]
    bobs = offered_tools(tools, has_image=False, namespace="bob")["search"]
    assert (alices.namespace, bobs.namespace) == ("alice", "bob")
    query = {"query_list": ["Quillmoor reactor commissioned"]}
    assert alices(query).passages[0].source == "doc:samples"
    assert all(not p.source.startswith("doc:") for p in bobs(query).passages)
    unbound = offered_tools(tools, has_image=False)["search"]  # e.g. test-time learning's rollouts
    assert all(not p.source.startswith("doc:") for p in unbound(query).passages)
