"""Training runs the app's plan of sub-questions: a rollout with agent.plan_shape = "subquestions" asks
the policy for a decomposition after the worked examples memory gives it (test-time learning's
memory_context), researches hop by hop, and keeps the decomposition as the plan it is rewarded for."""

from __future__ import annotations

from types import SimpleNamespace

from backend.episode import EpisodeSettings
from backend.events import HopAnswered
from training.episode import Grader, run_episode
from tests.backend.scripted_model import ScriptedChatModel
from tests.training.hops_example import DECOMPOSITION, FESTIVAL, WORKED


def test_a_rollout_decomposes_after_the_worked_examples_and_researches_hop_by_hop(shared_tools):
    planner = ScriptedChatModel("policy", [DECOMPOSITION])
    executor = ScriptedChatModel("executor", ["Fyre Festival", "Great Exuma"])
    episode = run_episode(question=FESTIVAL, ground_truth="Great Exuma", planner_model=planner, executor_model=executor,
                          tools=shared_tools, grader=Grader(), settings=EpisodeSettings(plan_shape="subquestions", guided=True),
                          memory_text=WORKED)
    assert WORKED in planner.prompts[0][-1]["content"]  # the worked example comes before the question
    assert [e.answer for e in episode.events if isinstance(e, HopAnswered)] == ["Fyre Festival", "Great Exuma"]
    assert episode.plan_steps[1] == "Where was #1 supposed to take place?"
    assert episode.answer == "Great Exuma" and episode.correct_final
    assert [hop["template"] for hop in episode.hops] == episode.plan_steps


def test_a_learned_memory_keeps_its_decomposition_as_a_worked_example(shared_tools, tmp_path, embedder):
    from backend.hops import worked_examples
    from backend.manager import Manager, memory_to_dict
    from memory_db import MemoryStore
    from training.rewards import Reward
    from training.ttrl.rollouts import ScoredRollout, consolidate
    from training.ttrl.signals import Signal

    planner = ScriptedChatModel("policy", [DECOMPOSITION])
    executor = ScriptedChatModel("executor", ["Fyre Festival", "Great Exuma"])
    episode = run_episode(question=FESTIVAL, ground_truth="Great Exuma", planner_model=planner, executor_model=executor,
                          tools=shared_tools, grader=Grader(), settings=EpisodeSettings(plan_shape="subquestions", guided=True),
                          memory_text="")
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    try:
        manager = Manager(ScriptedChatModel("manager"), store)
        signal = Signal(FESTIVAL, "ground_truth", "alice", "Great Exuma", "stream:q1")
        [stored] = consolidate(signal, [ScoredRollout(episode, [], Reward(total=1.0, parts={}))], manager=manager,
                               memories_used=[], version="v0000")
        memory = store.get(stored, namespace="alice")
        assert [hop["template"] for hop in memory.provenance["decomposition"]] == episode.plan_steps
        shown = memory_to_dict(SimpleNamespace(memory=memory, similarity=1.0, score=1.0))
        [(question, hops, _)] = worked_examples([shown])  # shown to a later Planner as a worked example
        assert question == FESTIVAL and hops == episode.plan_steps
    finally:
        store.close()
