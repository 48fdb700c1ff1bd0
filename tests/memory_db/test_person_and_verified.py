"""Whose word a memory keeps: a person's label, edit or pin outranks any later run; a verified verdict
(ground truth, feedback) outranks the Judge's own opinion; a repeat that may not replace adds an outcome."""

from __future__ import annotations

from memory_db import NewMemory

FYRE = "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?"
MAGAZINE = "Which magazine was started first, Arthur's Magazine or First for Women?"
FILM = "Were Scott Derrickson and Ed Wood of the same nationality?"
NATIONALITY = "Were H. G. Wells and Rubén Darío both English?"


def run_memory(question, correct, *, verified, summary="Searched: the festival.", namespace="default"):
    source = "ground_truth" if verified else "judge"
    return NewMemory(question, summary, "1. Search for the festival", correct, namespace=namespace,
                     provenance={"verified": verified, "verdict_source": source})


def test_a_verified_wrong_answer_replaces_the_judges_unverified_success(open_store):
    store = open_store()
    guessed = store.add(run_memory(FYRE, True, verified=False, summary="Answered 'Lisbon, Portugal' (unverified)."))
    checked = store.add(run_memory(FYRE, False, verified=True, summary="Answered 'Lisbon': incorrect (verified)."))
    assert checked.id == guessed.id and checked.correct is False
    assert store.get(guessed.id, namespace="default").provenance["verified"] is True
    assert store.history(guessed.id, namespace="default")[0].action == "replace"


def test_an_unverified_run_never_replaces_a_verified_memory_nor_moves_its_counts(open_store):
    store = open_store()
    verified = store.add(run_memory(FYRE, False, verified=True, summary="incorrect (verified)"))
    again = store.add(run_memory(FYRE, True, verified=False, summary="short"))
    kept = store.get(verified.id, namespace="default")
    assert again.id == verified.id and (kept.correct, kept.summary) == (False, "incorrect (verified)")
    assert (kept.usage_count, kept.success_count) == (verified.usage_count, verified.success_count)
    assert [h.action for h in store.history(verified.id, namespace="default")] == ["add"]


def test_a_persons_label_and_edit_survive_the_same_question_asked_again(open_store):
    store = open_store()
    first = store.add(run_memory(FYRE, True, verified=False, summary="Answered 'Lisbon' (unverified)."))
    store.relabel(first.id, namespace="default", correct=False, actor="user:alice")
    store.edit(first.id, namespace="default", summary="Wrong: the festival was Fyre, in the Bahamas.", actor="user:alice")
    # a later run, even a verified one with the opposite label, adds an outcome instead of replacing
    store.add(run_memory(FYRE, True, verified=True, summary="Answered 'Great Exuma': correct (verified)."))
    kept = store.get(first.id, namespace="default")
    assert (kept.correct, kept.summary) == (False, "Wrong: the festival was Fyre, in the Bahamas.")
    assert kept.provenance["verdict_source"] == "person" and kept.provenance["edited_by"] == "user:alice"
    assert (kept.usage_count, kept.success_count) == (first.usage_count + 1, first.success_count + 1)
    assert [h.action for h in store.history(first.id, namespace="default")][:3] == ["outcome", "edit", "relabel"]
    # an unverified run changes nothing at all
    store.add(run_memory(FYRE, True, verified=False, summary="x"))
    assert store.get(first.id, namespace="default") == kept


def test_a_pinned_memory_is_never_replaced(open_store):
    store = open_store()
    first = store.add(run_memory(FYRE, False, verified=False, summary="Pinned lesson."))
    store.pin(first.id, namespace="default")
    store.add(run_memory(FYRE, True, verified=True, summary="short"))
    assert store.get(first.id, namespace="default").summary == "Pinned lesson."


def test_the_relevance_floor_keeps_an_unrelated_memory_out(open_store):
    store = open_store()
    store.add(run_memory(MAGAZINE, True, verified=True, summary="Compared founding years."))
    store.add(run_memory(NATIONALITY, True, verified=True, summary="Checked each nationality."))
    unfloored = store.search_contrastive(FILM, k=2)
    assert {m.memory.question for m in unfloored.successful} == {MAGAZINE, NATIONALITY}
    floored = store.search_contrastive(FILM, k=2, min_similarity=0.35)
    assert [m.memory.question for m in floored.successful] == [NATIONALITY]
    assert all(m.similarity >= 0.35 for m in floored.successful)


def test_the_judges_newer_opinion_replaces_its_older_one(open_store):
    store = open_store()
    old = store.add(run_memory(FYRE, True, verified=False, summary="A model's memo: Lisbon, July 1986."))
    newer = store.add(run_memory(FYRE, False, verified=False, summary="Searched: 'Fyre Festival' found Fyre Festival."))
    assert newer.id == old.id and newer.summary.startswith("Searched") and newer.correct is False
