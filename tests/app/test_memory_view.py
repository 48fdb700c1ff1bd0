"""The memory view's data functions and the read-only demo store, on a real store and agent."""

from __future__ import annotations

import json

import pytest

from app.memory_view import MemoryFilter, detail_markdown, find_memories, import_preview, runs_using, table_rows, unreadable_note
from app.readonly import ReadOnlyStore
from backend.agent import RunRequest, ResearchAgent
from memory_db import ImportFileError, NewMemory


def add(store, question, correct=True, summary="Search, then compare the years.", namespace="default", verified=False):
    provenance = {"verified": True, "verdict_source": "person"} if verified else {}
    return store.add(NewMemory(question=question, summary=summary, plan="1. search", correct=correct,
                               namespace=namespace, provenance=provenance))


def test_filters_text_and_semantic_search(runtime):
    store = runtime.store
    llamas = add(store, "Where do llamas live in the wild?")
    add(store, "How tall is the Eiffel Tower?", correct=False, summary="Looked up the tower's height.")
    store.pin(llamas.id, namespace="default")
    assert [m.id for m in find_memories(store, "default", MemoryFilter(label="successful"))] == [llamas.id]
    assert [m.question for m in find_memories(store, "default", MemoryFilter(query="TOWER'S height"))] == [
        "How tall is the Eiffel Tower?"
    ]
    assert [m.id for m in find_memories(store, "default", MemoryFilter(pinned_only=True))] == [llamas.id]
    ranked = find_memories(store, "default", MemoryFilter(query="camelids of the Andes habitat", semantic=True))
    assert ranked[0].id == llamas.id and len(ranked) == 2
    rows = table_rows(ranked)
    assert rows[0][0] == llamas.id and rows[0][3] == "correct (the Judge's opinion, unverified)" and rows[0][6] == "yes"
    assert rows[1][3] == "incorrect (the Judge's opinion, unverified)"  # no ground truth or person stands behind either
    assert rows[0][7:9] == [0, ""]  # no run has used either since it was stored: no win rate to show
    store.relabel(llamas.id, namespace="default", correct=True, actor="user")
    assert table_rows([store.get(llamas.id, namespace="default")])[0][3] == "correct (you relabelled it in Memory)"
    assert find_memories(store, "other", MemoryFilter()) == []


def test_a_new_lesson_shows_no_uses_and_its_win_rate_counts_only_later_uses(runtime):
    store = runtime.store
    lesson = add(store, "How tall is the Eiffel Tower?", correct=False, verified=True)
    assert "**Win rate:** not used yet" in detail_markdown(lesson) and "1.00" not in detail_markdown(lesson)
    assert "**Label:** incorrect (you relabelled it in Memory): a failure lesson" in detail_markdown(lesson)
    store.record_outcome([lesson.id], correct=False, namespace="default")
    used = store.get(lesson.id, namespace="default")
    assert "**Win rate:** 0 of 1 use succeeded (0.00)" in detail_markdown(used)
    assert table_rows([used])[0][7:9] == [1, 0.0]


def test_runs_that_used_a_memory_come_from_provenance_and_the_run_log(runtime):
    seed = add(runtime.store, "Which magazine was started first, Arthur's Magazine or First for Women?", verified=True)
    events = list(runtime.agent.run(RunRequest("Which magazine came first, Arthur's Magazine or First for Women?")))
    run_id = events[0].run_id
    later = runtime.store.add(NewMemory(question="Is the Eiffel Tower taller than Big Ben?", summary="Compared heights.",
                                        plan="1. search", correct=True,
                                        provenance={"run_id": "older-run", "memories_used": [seed.id]}))
    rows = {r[0]: r for r in runs_using(runtime.store, runtime.runlog, "default", seed.id)}
    assert set(rows) == {run_id, "older-run"}
    assert rows["older-run"][2] == f"provenance of memory {later.id[:8]}"
    assert runs_using(runtime.store, runtime.runlog, "default", "no-such-id") == []


def test_import_preview_validates_without_importing(runtime, tmp_path):
    add(runtime.store, "Who wrote Hamlet?")
    path = tmp_path / "export.jsonl"
    runtime.store.export_jsonl("default", path)
    summary, rows = import_preview(str(path), "elsewhere")
    assert summary.startswith("1 memories") and rows[0][1] == "Who wrote Hamlet?"
    assert runtime.store.count(namespace="elsewhere") == 0
    broken = tmp_path / "broken.jsonl"
    broken.write_text(path.read_text() + json.dumps({"type": "memory", "id": "x"}) + "\n")
    with pytest.raises(ImportFileError, match="line"):
        import_preview(str(broken), "elsewhere")


def test_read_only_runs_use_memories_but_change_nothing(runtime):
    seed = add(runtime.store, "Which magazine was started first, Arthur's Magazine or First for Women?", verified=True)
    agent = runtime.agent
    read_only = ResearchAgent(agent.config, models=agent.models, tools=agent.tools,
                              store=ReadOnlyStore(runtime.store), runlog=agent.runlog)
    events = {e.kind: e for e in read_only.run(RunRequest("Which magazine came first, Arthur's Magazine or First for Women?"))}
    assert seed.id in [m["id"] for m in events["memories"].successful]
    assert events["memory_stored"].memory_id.startswith("unsaved-")
    assert runtime.store.count(namespace="default") == 1
    assert runtime.store.get(seed.id, namespace="default").usage_count == seed.usage_count
    with pytest.raises(PermissionError, match="read-only"):
        ReadOnlyStore(runtime.store).relabel(seed.id, namespace="default", correct=False)


def test_an_unreadable_memory_is_named_with_how_to_remove_it_and_the_rest_still_lists(runtime):
    from sqlalchemy import create_engine, update

    from memory_db.schema import memories

    store = runtime.store
    broken, fine = add(store, "Who wrote Hamlet?"), add(store, "How tall is the Eiffel Tower?")
    assert unreadable_note(store, "default") == ""
    engine = create_engine(store.url)
    with engine.begin() as conn:  # as an older version's unvalidated undo could leave a row
        conn.execute(update(memories).where(memories.c.id == broken.id).values(provenance=["not", "an", "object"]))
    engine.dispose()
    note = unreadable_note(store, "default")
    assert f"`{broken.id}` (its provenance is a JSON list, not an object)" in note and "then Delete" in note
    assert [m.id for m in find_memories(store, "default", MemoryFilter())] == [fine.id]
    assert [m.id for m in find_memories(store, "default", MemoryFilter(query="Hamlet", semantic=True))] == [fine.id]
    store.delete(broken.id, namespace="default", actor="default")
    assert unreadable_note(store, "default") == ""


def test_the_import_preview_says_which_memories_are_already_here(runtime, tmp_path):
    kept = add(runtime.store, "Who wrote Hamlet?")
    path = tmp_path / "export.jsonl"
    runtime.store.export_jsonl("default", path)
    summary, rows = import_preview(str(path), "default", runtime.store)
    assert rows == [[kept.id, "Who wrote Hamlet?", "successful", kept.question_type, 1, "already here (same id)"]]
    assert "1 of them is already here (same id) and 0 are new" in summary and "skips or replaces" in summary
    summary, rows = import_preview(str(path), "elsewhere", runtime.store)
    assert rows[0][-1] == "new" and "already here" not in summary


def test_the_detail_shows_the_sources_an_answer_cites_and_a_learned_memorys_rollout(runtime):
    from memory_db.provenance import LEARNING, RESEARCH, Provenance

    store = runtime.store
    cited = Provenance(origin=RESEARCH, answer="Paris", first_answer="Paris", verified=True,
                       verdict_source="ground_truth", ground_truth="Paris", memories_used=[], trajectory="t",
                       sources=["https://example.org/eiffel", "Eiffel *Tower*"], searched=["Eiffel Tower"])
    memory = store.add(NewMemory(question="Where is the Eiffel Tower?", summary="s", plan="1. search", correct=True,
                                 namespace="default", provenance=cited.to_dict()))
    assert "**Sources cited:** https://example.org/eiffel · Eiffel \\*Tower\\*" in detail_markdown(memory)

    learned = Provenance(origin=LEARNING, answer="Lyon", first_answer="Lyon", verified=False, verdict_source="judge",
                         ground_truth=None, memories_used=[], trajectory="t", signal="stream", signal_kind="thumbs",
                         planner_version="v0003", rollouts=4, reward=0.25)
    memory = store.add(NewMemory(question="Which city hosts the Louvre?", summary="s", plan="1. search", correct=False,
                                 namespace="default", provenance=learned.to_dict()))
    detail = detail_markdown(memory)
    assert "**From test-time learning:** one of 4 rollouts by Planner v0003, reward 0.25 (signal: stream)" in detail
    assert "Sources cited" not in detail


def test_the_detail_shows_a_plan_of_sub_questions_hop_by_hop_with_answers_and_sentences(runtime):
    from memory_db.provenance import RESEARCH, Provenance

    hops = [{"number": 1, "template": "Which festival was Billy McFarland charged for?",
             "question": "Which festival was Billy McFarland charged for?", "answer": "Fyre Festival",
             "sentence": "Fyre Festival: The Fyre Festival was a *fraudulent* luxury music festival.", "queries": []},
            {"number": 2, "template": "Where was #1 to take place?", "question": "Where was Fyre Festival to take place?",
             "answer": "Lisbon", "sentence": "", "queries": []}]
    provenance = Provenance(origin=RESEARCH, answer="Lisbon", first_answer="Lisbon", verified=True,
                            verdict_source="ground_truth", ground_truth="Great Exuma", memories_used=[], trajectory="t",
                            decomposition=hops)
    memory = runtime.store.add(NewMemory(question="Where was the festival to take place?", summary="s",
                                         plan="1. Which festival?\n2. Where?", correct=False, namespace="default",
                                         provenance=provenance.to_dict()))
    detail = detail_markdown(memory)
    assert ("**Sub-questions, as researched:**\n\n1. Which festival was Billy McFarland charged for? → **Fyre Festival** "
            "(Fyre Festival: “The Fyre Festival was a \\*fraudulent\\* luxury music festival.”)\n"
            "2. Where was Fyre Festival to take place? → **Lisbon** (no retrieved sentence states it)") in detail


def test_a_provenance_of_the_wrong_types_from_an_import_is_shown_without_them_and_says_why(runtime, tmp_path):
    hostile = {"run_id": ["r1"], "answer": 42, "ground_truth": {"text": "Paris"}, "verdict_source": "person",
               "memories_used": "m1", "taught_answer": 7, "sources": ["Paris", 3], "from_a_newer_version": True}
    record = {"type": "memory", "id": "5b0f8d2a-6f4e-4c1e-9c39-2b7f6f1f0a11", "question": "Where is the Louvre?",
              "caption": None, "summary": "Searched wiki: Paris.", "plan": "1. search", "correct": True,
              "question_type": "location", "modality": "text", "usage_count": 1, "success_count": 1, "win_rate": 1.0,
              "pinned": False, "provenance": hostile, "created_at": "2026-01-01T00:00:00+00:00",
              "updated_at": "2026-01-01T00:00:00+00:00"}
    path = tmp_path / "hostile.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert runtime.store.import_jsonl("default", path) == 1
    (memory,) = runtime.store.list(namespace="default")
    assert table_rows([memory])[0][2] == ""  # neither a taught answer nor an answer of the run
    detail = detail_markdown(memory)
    assert "**Verdict from:** a person (Memory view)\n" in detail and "ground truth:" not in detail
    assert "**Sources cited:** Paris\n" in detail and "From run" not in detail and "Answer given" not in detail
    assert ("**Left out of its provenance (stored values of the wrong type):** ground\\_truth: an object, not text; "
            "answer: a whole number, not text; memories\\_used: text, not a list; run\\_id: a list, not text; "
            "sources: 1 of its 2 items of the wrong type; taught\\_answer: a whole number, not text") in detail
    assert runs_using(runtime.store, runtime.runlog, "default", "m1") == []
