"""JSONL export/import: exact round trip; all-or-nothing import with line-precise errors."""
import io
import json

import pytest

from memory_db import ImportFileError, MemoryStore, NewMemory


def fill(store, namespace="team"):
    a = store.add(NewMemory("Who composed the Moonlight Sonata?", "Searched wiki: Beethoven.", "1. search", True,
                            namespace=namespace, provenance={"run_id": "r1", "judge": {"verdict": "correct"}}))
    b = store.add(NewMemory("What is shown here?", "Reverse image search first.", "1. image search", False,
                            namespace=namespace, caption="a white marble mausoleum with a dome",
                            question_type="location"))
    store.record_outcome([a.id, b.id], correct=True, namespace=namespace)
    store.record_outcome([a.id], correct=False, namespace=namespace)
    store.pin(b.id, namespace=namespace)
    store.edit(a.id, namespace=namespace, plan="1. search 2. verify the composer")
    return [store.get(a.id, namespace=namespace), store.get(b.id, namespace=namespace)]


def exported(store, namespace="team") -> str:
    out = io.StringIO()
    store.export_jsonl(namespace, out)
    return out.getvalue()


def test_export_then_import_into_an_empty_store_reproduces_it(store, tmp_path, embedder, open_store):
    originals = fill(store)
    path = tmp_path / "team.jsonl"
    store.export_jsonl("team", path)
    target = MemoryStore(f"sqlite:///{tmp_path / 'other.db'}", embedder=embedder)
    try:
        assert target.import_jsonl("team", path) == 2
        copies = sorted(target.list(namespace="team"), key=lambda m: m.question)
        assert copies == sorted(originals, key=lambda m: m.question)
        assert [(h.action, h.before, h.after) for h in target.history(namespace="team")] == \
            [(h.action, h.before, h.after) for h in store.history(namespace="team")]
        hits = target.search_contrastive("Who wrote the Moonlight Sonata?", namespace="team").successful
        assert hits[0].memory == originals[0]
        copied, original = exported(target).splitlines()[1:], exported(store).splitlines()[1:]
        assert [line for line in copied if '"type": "memory"' in line] == \
            [line for line in original if '"type": "memory"' in line]
        assert [json.loads(line)["actor"] for line in copied if '"type": "history"' in line] == \
            [f"import (the file says {h.actor})" for h in store.history(namespace="team")][::-1]
    finally:
        target.close()


def test_import_accepts_binary_files(store, tmp_path):
    fill(store)
    path = tmp_path / "team.jsonl"
    store.export_jsonl("team", path)
    with open(path, "rb") as handle:
        assert store.import_jsonl("copy", handle) == 2


def memory_line(**overrides) -> str:
    record = {"type": "memory", "id": "5b0f8d2a-6f4e-4c1e-9c39-2b7f6f1f0a11", "question": "Who wrote Dune?",
              "summary": "Searched the wiki.", "plan": "1. search", "correct": True} | overrides
    return json.dumps({k: v for k, v in record.items() if v is not ...})


GOOD = memory_line()


def nested_lists(depth: int):
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("bad_line, line_number, reason", [
    ("{not json", 2, "not valid JSON"),
    ("[1, 2]", 2, "must be a JSON object"),
    (memory_line(question=...), 2, "field 'question' is missing"),
    (memory_line(correct="yes"), 2, "field 'correct' must be bool"),
    (memory_line(question_type="weather"), 2, "Question type 'weather' is unknown"),
    (memory_line(usage_count=1, success_count=5), 2, "success_count <= usage_count"),
    (memory_line(id="not-a-uuid"), 2, "must be a UUID"),
    (memory_line(rogue_field=1), 2, "unknown field"),
    (memory_line(created_at="yesterday"), 2, "not an ISO timestamp"),
    (memory_line(type="script"), 2, "unknown record type"),
    (GOOD, 2, "appears twice (first on line 1)"),
    ('{"type": "memory", "summary": "' + "x" * 1_100_000 + '"}', 2, "longer than 1000000 bytes"),
    # Values Python parses but no database stores: each named by line and field, nothing imported.
    (memory_line(created_at="0001-01-01T00:00:00+14:00"), 2, "'created_at' (0001-01-01T00:00:00+14:00) lies outside"),
    (memory_line(usage_count=2**63), 2, "'usage_count' must be an integer from 1 to 2147483647"),
    (memory_line()[:-1] + ', "usage_count": ' + "9" * 5000 + "}", 2, "'usage_count' must be an integer from 1 to"),
    (memory_line(provenance={"score": 7}).replace('"score": 7', '"score": ' + "7" * 5000), 2, "'provenance.score' holds a 5000-digit integer"),
    (memory_line()[:-1] + ', "provenance": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}", 2,
     "'provenance.a.a.a"),
    (memory_line(provenance={"a": nested_lists(33)}), 2,
     "nested deeper than 32 levels"),
    (memory_line(summary="lone \ud800 surrogate"), 2, "'summary' contains a lone UTF-16 surrogate"),
    (memory_line(provenance={"ratio": float("nan")}), 2, "'provenance.ratio' holds nan"),
])
def test_a_bad_line_rejects_the_whole_file_and_names_the_line(store, bad_line, line_number, reason):
    existing = fill(store)
    before = exported(store)
    content = GOOD + "\n" + bad_line + "\n" + memory_line(id="0d7e7b8c-7a57-4a37-9a68-6f6a37f1f5d2") + "\n"
    with pytest.raises(ImportFileError, match=f"line {line_number}") as caught:
        store.import_jsonl("team", io.StringIO(content))
    assert reason in str(caught.value)
    assert "Nothing was imported" in str(caught.value)
    assert exported(store).splitlines()[1:] == before.splitlines()[1:]
    assert store.count(namespace="team") == len(existing)


def test_an_id_already_stored_rejects_the_import(store):
    originals = fill(store)
    content = memory_line(id="0d7e7b8c-7a57-4a37-9a68-6f6a37f1f5d2") + "\n" + memory_line(id=originals[0].id)
    with pytest.raises(ImportFileError, match="line 2: memory id .* already exists"):
        store.import_jsonl("team", io.StringIO(content))
    assert store.count(namespace="team") == 2


def test_a_hand_written_file_gets_defaults(store):
    assert store.import_jsonl("solo", io.StringIO(GOOD + "\n\n")) == 1
    memory = store.get("5b0f8d2a-6f4e-4c1e-9c39-2b7f6f1f0a11", namespace="solo")
    assert (memory.usage_count, memory.success_count, memory.question_type, memory.modality) == (1, 1, "others", "text")


def test_an_unknown_format_header_is_refused(store):
    header = json.dumps({"format": "something-else", "version": 9})
    with pytest.raises(ImportFileError, match="line 1: unknown format"):
        store.import_jsonl("team", io.StringIO(header + "\n" + GOOD))


def test_export_without_history_imports_memories_only(store):
    originals = fill(store)
    out = io.StringIO()
    store.export_jsonl("team", out, include_history=False)
    assert '"type": "history"' not in out.getvalue()
    assert store.import_jsonl("copy", io.StringIO(out.getvalue())) == len(originals)
    assert store.history(namespace="copy") == []


def test_a_binary_file_that_is_not_utf8_names_the_line(store):
    content = (GOOD + "\n").encode() + b'{"type": "memory", "question": "\xff\xfe"}\n'
    with pytest.raises(ImportFileError, match="line 2: the line is not UTF-8"):
        store.import_jsonl("team", io.BytesIO(content))
    assert store.count(namespace="team") == 0


def test_importing_ones_own_export_back_can_skip_or_replace_the_memories_it_holds(store):
    originals = fill(store)
    own = exported(store)
    history_before = len(store.history(namespace="team"))
    with pytest.raises(ImportFileError, match="already exists"):  # the default: nothing changes
        store.import_jsonl("team", io.StringIO(own))

    skipped = store.import_file("team", io.StringIO(own), existing="skip")
    assert (skipped.added, skipped.replaced, skipped.skipped, skipped.history) == (0, 0, 2, 0)
    assert sorted(store.list(namespace="team"), key=lambda m: m.id) == sorted(originals, key=lambda m: m.id)
    assert len(store.history(namespace="team")) == history_before  # its history is not added twice

    edited = store.edit(originals[0].id, namespace="team", summary="A later summary.")
    replaced = store.import_file("team", io.StringIO(own), actor="import:carol", existing="replace")
    assert (replaced.added, replaced.replaced, replaced.skipped, replaced.history) == (0, 2, 0, 0)
    assert store.get(originals[0].id, namespace="team").summary == originals[0].summary
    entry = store.history(originals[0].id, namespace="team")[0]
    assert (entry.action, entry.actor, entry.before["summary"]) == ("import", "import:carol", edited.summary)
    store.undo(entry.id, namespace="team")  # a replacement is undone like any change
    assert store.get(originals[0].id, namespace="team").summary == "A later summary."
    hits = store.search_contrastive("Who composed the Moonlight Sonata?", namespace="team").successful
    assert [h.memory.id for h in hits] == [originals[0].id]  # still indexed once


def test_a_mixed_import_adds_the_new_memories_and_skips_the_stored_ones(store):
    originals = fill(store)
    new_id = "0d7e7b8c-7a57-4a37-9a68-6f6a37f1f5d2"
    content = memory_line(id=originals[1].id) + "\n" + memory_line(id=new_id) + "\n"
    outcome = store.import_file("team", io.StringIO(content), existing="skip")
    assert (outcome.added, outcome.skipped) == (1, 1)
    assert store.get(originals[1].id, namespace="team") == originals[1]
    assert store.get(new_id, namespace="team").question == json.loads(memory_line())["question"]
    with pytest.raises(Exception, match="existing must be one of"):
        store.import_file("team", io.StringIO(content), existing="merge")


def test_imported_history_names_the_importer_as_its_actor_and_keeps_the_files_name_as_the_files(store):
    alice = fill(store, namespace="alice")
    from_alice = exported(store, namespace="alice")
    store.import_jsonl("bob", io.StringIO(from_alice), actor="import:bob")
    entries = store.history(alice[0].id, namespace="bob")
    assert entries and all(e.actor.startswith("import:bob (the file says ") for e in entries)
    assert {e.actor for e in entries} == {"import:bob (the file says manager)", "import:bob (the file says user)"}

    store.edit(alice[0].id, namespace="bob", summary="Bob's own summary.", actor="bob")
    again = store.import_file("bob", io.StringIO(from_alice), actor="import:bob", existing="replace")
    assert (again.replaced, again.history) == (2, 0)  # the entries it brought before are not added twice
    newest = store.history(alice[0].id, namespace="bob")[:2]
    assert [(e.action, e.actor) for e in newest] == [("import", "import:bob"), ("edit", "bob")]


def test_a_forged_actor_name_cannot_pass_for_the_importer():
    from memory_db.transfer import imported_actor

    forged = "x" * 500
    assert imported_actor("import:bob", forged).startswith("import:bob (the file says xxx")
    assert len(imported_actor("import:bob", forged)) == 200 and imported_actor("import:bob", "  ") == "import:bob"


LONG = "y" * 4001


@pytest.mark.parametrize("line, field", [
    (memory_line(question="Who wrote Dune? " + "x" * 900_000), "question"),
    (memory_line(plan=LONG), "plan"),
    (memory_line(caption=LONG, modality="text+image"), "caption"),
    (memory_line(summary="word" + LONG), "summary"),
    (memory_line(provenance={"trajectory": {"steps": ["short", LONG]}}), "provenance.trajectory.steps[1]"),
    (json.dumps({"type": "history", "id": 1, "memory_id": "5b0f8d2a-6f4e-4c1e-9c39-2b7f6f1f0a11",
                 "action": "edit", "before": None, "after": None, "actor": LONG,
                 "created_at": "2025-05-01T10:00:00+00:00"}), "actor"),
])
def test_an_imported_text_longer_than_a_question_may_be_rejects_the_file(store, line, field):
    content = GOOD + "\n" + line + "\n"
    with pytest.raises(ImportFileError, match="line 2") as caught:
        store.import_jsonl("team", io.StringIO(content), max_text_chars=4000)
    assert f"field {field!r}" in str(caught.value) and "the limit is 4,000" in str(caught.value)
    assert store.count(namespace="team") == 0
    assert store.import_jsonl("team", io.StringIO(GOOD + "\n" + memory_line(
        id="0d7e7b8c-7a57-4a37-9a68-6f6a37f1f5d2", plan="y" * 4000)), max_text_chars=4000) == 2
