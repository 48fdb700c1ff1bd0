"""A user's documents are theirs alone: another namespace's search, listing, sources and citations
never show them; a shared collection (added by an admin) is read by every namespace."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from backend.agent import ResearchAgent, RunRequest
from backend.documents import DocumentError
from backend.events import AnswerReady, ToolReturned
from backend.runlog import RunLog
from backend.tools.search import WikiSearchTool
from memory_db import MemoryStore

QUESTION = "When was the Quillmoor reactor commissioned?"


@pytest.fixture
def two_users(store, sample_dir, tmp_path):
    store.add_paths("alice", "private", [sample_dir / "notes" / "reactors.md"])
    handbook = tmp_path / "handbook.txt"
    handbook.write_text("Visitors to the archive must sign the register at the front desk.\n", encoding="utf-8")
    store.add_paths("root", "handbook", [handbook], shared=True)
    return store


def test_search_and_listing_are_per_namespace_with_shared_collections_for_all(two_users):
    store = two_users
    assert [c.label for c in store.collections("alice")] == ["private", "shared/handbook"]
    assert [c.label for c in store.collections("bob")] == ["shared/handbook"]
    assert store.has_documents("bob")  # the shared collection
    alice = store.search("alice", ["Quillmoor reactor commissioned"], 3)[0]
    assert alice[0][0].source == "doc:private"
    bob = store.search("bob", ["Quillmoor reactor commissioned", "Ada Vantrell engineer"], 3)
    assert all(p.source != "doc:private" for hits in bob for p, _ in hits)
    for namespace in ("alice", "bob"):
        passage, _ = store.search(namespace, ["sign the register front desk"], 3)[0][0]
        assert (passage.source, passage.url) == ("doc:shared/handbook", "doc://shared/handbook/handbook.txt")


def test_another_namespaces_sources_cannot_be_opened_or_changed(two_users):
    store = two_users
    locator = store.search("alice", ["Quillmoor reactor"], 1)[0][0][0].url
    path, name = store.source("alice", locator)
    assert path.read_text(encoding="utf-8").startswith("Preface") and name == "reactors.md"
    assert [p.title for p in store.passages_at("alice", locator)] == ["reactors.md § Reactors"]
    with pytest.raises(DocumentError, match="yours to read"):
        store.source("bob", locator)
    with pytest.raises(DocumentError):
        store.passages_at("bob", locator)
    with pytest.raises(DocumentError):
        store.remove("bob", "private")  # bob's own namespace has no such collection
    assert [c.label for c in store.collections("alice")][0] == "private"
    assert store.source("bob", "doc://shared/handbook/handbook.txt")[1] == "handbook.txt"


def call(name: str, **arguments) -> str:
    return f"<think>look it up</think><tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_citations_of_one_users_run_never_show_anothers_documents(two_users, wiki_search, tmp_path, embedder,
                                                                   scripted_model_class):
    from backend.config import RoleConfig, load_config

    base = load_config(environ={})
    config = replace(base, data_dir=tmp_path, memory_url=f"sqlite:///{tmp_path / 'memory.sqlite'}",
                     agent=replace(base.agent, max_turns=2, reflections=0, sparse_memory_planner="planner",
                                   guided_actions="off"),
                     roles={name: RoleConfig() for name in base.roles})
    memories = MemoryStore(config.resolved_memory_url, embedder=embedder)
    tools = {"search": WikiSearchTool(wiki_search.index, two_users)}

    def ask(namespace):
        models = {
            "planner": scripted_model_class("planner", ["1. Search for the Quillmoor reactor"]),
            "executor": scripted_model_class("executor", [call("search", query_list=["Quillmoor reactor commissioned"]),
                                                          "<think>found it</think><answer>1987</answer>"]),
            "judge": scripted_model_class("judge"),
            "manager": scripted_model_class("manager"),
        }
        agent = ResearchAgent(config, models=models, tools=tools, store=memories, runlog=RunLog(config.runs_dir))
        return list(agent.run(RunRequest(QUESTION, namespace=namespace, ground_truth="1987")))

    try:
        alice, bob = ask("alice"), ask("bob")
    finally:
        memories.close()
    cited = next(e for e in alice if isinstance(e, AnswerReady)).sources
    assert cited and cited[0]["url"] == "doc://private/reactors.md#section=Reactors"
    assert cited[0]["source"] == "doc:private" and "1987" in cited[0]["sentence"]
    bob_passages = [p for e in bob if isinstance(e, ToolReturned) for p in e.passages]
    assert bob_passages and all(p["source"] != "doc:private" for p in bob_passages)
    bob_cited = next(e for e in bob if isinstance(e, AnswerReady)).sources
    assert all("private" not in (c.get("url") or "") for c in bob_cited)
