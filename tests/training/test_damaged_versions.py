"""A damaged learning folder: each of the seven damages is read without an error, what cannot be loaded
is set aside in versions/quarantine with its reason, and the last version that loads is current; a
Planner that does not load keeps its signal waiting instead of dropping it."""

from __future__ import annotations

import json

import pytest

from backend.feedback import FeedbackItem, FeedbackQueue
from backend.manager import Manager
from memory_db import MemoryStore
from tests.learning_folder import DAMAGES, two_promoted_versions, write_adapter
from tests.training.conftest import CANARY, QUESTIONS
from training.ttrl import TestTimeLearner
from training.ttrl.version_folder import ADAPTER, PROMOTED, Version
from training.ttrl.versions import VersionStore


@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
def test_a_damaged_folder_is_read_set_aside_and_answered_from_the_last_version_that_loads(tmp_path, tiny_model_dir,
                                                                                         damage):
    root = tmp_path / "ttrl"
    two_promoted_versions(root, tiny_model_dir)
    damage.apply(root)

    store = VersionStore(root)
    assert store.current().number == damage.answering
    notes = " | ".join(store.notes())
    assert damage.note in notes
    quarantine = root / "versions" / "quarantine"
    set_aside = sorted(p.name for p in quarantine.iterdir() if p.name != "quarantined.jsonl") if quarantine.exists() else []
    if damage.set_aside is None:
        assert set_aside == [] and [v.number for v in store.all()] == [0, 1, 2]
    else:
        [moved] = set_aside
        assert moved.startswith(damage.set_aside)
        [record] = store.quarantined()
        assert record["moved_to"] == f"versions/quarantine/{moved}" and record["reason"]
    if damage.set_aside == "v0002":
        assert [v.number for v in store.all()] == [0, 1]
        # A version set aside keeps its number: the next one is v0003.
        staged = store.staging_dir()
        write_adapter(staged / ADAPTER, tiny_model_dir, seed=3)
        assert store.add(staged, Version(0, status=PROMOTED, parent=1), make_current=False).number == 3

    # Another process reading the repaired folder finds nothing more to move, and the same current version.
    again = VersionStore(root)
    assert again.current().number == damage.answering and len(again.quarantined()) == len(store.quarantined())
    pointer = json.loads((root / "current.json").read_text()) if (root / "current.json").exists() else {"version": 0}
    assert pointer["version"] == damage.answering


def _feedback(question: str, answer: str) -> FeedbackItem:
    return FeedbackItem(run_id="run0", namespace="alice", user="alice", question=question, answer=answer, thumbs="up",
                        right_answer=None, comment=None, label_before="unsure", label_after="correct",
                        judge_method="your thumbs up", memory_id=None, feedback_id="feedback0")


def test_a_signal_whose_planner_does_not_load_waits_with_the_error_and_is_learned_after_a_rollback(
        tmp_path, tiny_model_dir, wiki_tools, embedder):
    from backend.config import LearningConfig
    from backend.llm.embedded import EmbeddedChatModel

    root = tmp_path / "ttrl"
    store = two_promoted_versions(root, tiny_model_dir)
    # Whole files the version store cannot fault, yet peft cannot apply them to this model.
    config = root / "versions" / "v0002" / ADAPTER / "adapter_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "target_modules": ["no_such_proj"]}))
    assert store.current().number == 2

    memory = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    try:
        queue = FeedbackQueue(memory)
        queue.submit(_feedback(*QUESTIONS[0]))
        model = EmbeddedChatModel(tiny_model_dir)
        settings = LearningConfig(enabled=True, rollouts_per_signal=2, signals_per_update=5, rollouts_per_hour=100,
                                  canary_size=1, max_turns=1, max_new_tokens=16, poll_seconds=0.05, lora_r=4,
                                  lora_alpha=8)
        learner = TestTimeLearner(settings, root=root, planner_base_dir=tiny_model_dir, executor_model=model,
                                  judge_model=model, manager=Manager(model, memory), tools=wiki_tools,
                                  canary_path=CANARY, feedback_queue=queue)

        assert learner.work_once() == "blocked"
        [waiting] = learner.pending
        assert waiting.question == QUESTIONS[0][0] and learner.status().pending == 1
        assert "The Planner being trained (v0002) could not be loaded" in learner.last_error
        assert "roll back to a version that loads" in learner.last_error
        [row] = learner.read_log("signals.jsonl")
        assert row["waits"] is True and row["source"] == "feedback:run0" and "the signal waits" in row["error"]
        assert learner.work_once() == "blocked" and len(learner.read_log("signals.jsonl")) == 1  # not tried again yet
        assert json.loads((root / "state.json").read_text())["pending"][0]["source"] == "feedback:run0"

        learner.rollback(1)
        assert learner.work_once() == "processed" and learner.pending == []
        learned = learner.read_log("signals.jsonl")[-1]
        assert "error" not in learned and learned["planner_version"] == "v0001" and learned["source"] == "feedback:run0"
    finally:
        memory.close()
