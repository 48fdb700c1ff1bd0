"""RFT, the cheaper learner: a verified successful run's plan becomes one supervised example, with no
rollouts; the update, the canary and the promotion are GRPO's. On the tiny random model, the real wiki
index and a real SQLite memory store."""

from __future__ import annotations

import torch

from memory_db.provenance import RESEARCH, Provenance
from memory_db import NewMemory
from training.ttrl import Signal
from training.ttrl.rft import plan_sample, rft_update, successful_memory
from training.policy import TurnSample

from tests.training.test_ttrl import make_learner, settings, store, tiny_model  # noqa: F401  (fixtures)

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def remember(store, run_id: str, *, verified: bool, correct: bool = True, question: str = QUESTION,
             subquestions: tuple[str, ...] = ()):
    """A run's memory; with `subquestions`, of a run that planned in sub-questions (as backend.episode stores it)."""
    provenance = Provenance(origin=RESEARCH, run_id=run_id, answer="Arthur's Magazine", first_answer="Arthur's Magazine",
                            verified=verified, verdict_source="ground_truth" if verified else "judge",
                            ground_truth="Arthur's Magazine" if verified else None, memories_used=[], trajectory="t",
                            decomposition=[{"number": i, "template": sub, "question": sub, "answer": "x", "sentence": "x"}
                                           for i, sub in enumerate(subquestions, 1)] or None)
    plan = ("\n".join(f"{i}. {sub}" for i, sub in enumerate(subquestions, 1)) if subquestions
            else "1. Search for Arthur's Magazine.\n2. Search for First for Women.")
    return store.add(NewMemory(question=question, summary=f"Compared the founding years ({run_id}).", plan=plan,
                               correct=correct, namespace="alice", provenance=provenance.to_dict()))


def test_only_a_verified_success_of_the_signals_run_is_learned_from(make_learner, store):
    learner = make_learner(plan_shape="steps", learner="rft")
    good = remember(store, "run-good", verified=True)
    remember(store, "run-unverified", verified=False)
    remember(store, "run-failed", verified=True, correct=False)
    signal = lambda run: Signal(QUESTION, "ground_truth", "alice", "Arthur's Magazine", f"feedback:{run}")  # noqa: E731
    assert successful_memory(learner.manager, signal("run-good")).id == good.id
    assert successful_memory(learner.manager, signal("run-unverified")) is None
    assert successful_memory(learner.manager, signal("run-failed")) is None
    assert successful_memory(learner.manager, Signal(QUESTION, "ground_truth", "alice", "x", "stream:1")) is None


def test_a_signal_naming_its_runs_memory_is_read_by_id_and_a_deleted_or_other_runs_memory_is_not(make_learner, store):
    learner = make_learner(plan_shape="steps", learner="rft")
    good = remember(store, "run-good", verified=True)
    other = remember(store, "run-other", verified=True, question="When was Arthur's Magazine founded?")
    assert other.id != good.id
    about = lambda run, memory_id: Signal(QUESTION, "ground_truth", "alice", "Arthur's Magazine",  # noqa: E731
                                          f"feedback:{run}", memory_id=memory_id)
    assert successful_memory(learner.manager, about("run-good", good.id)).id == good.id
    assert successful_memory(learner.manager, about("run-good", other.id)) is None
    store.delete(good.id, namespace="alice", actor="alice")
    assert successful_memory(learner.manager, about("run-good", good.id)) is None


def test_the_example_is_the_planner_turn_the_app_would_prompt_without_the_memory_itself(make_learner, store):
    from backend.prompts.planner import PLAN_PREFILL, plan_messages

    learner = make_learner(plan_shape="steps", learner="rft")
    good = remember(store, "run-good", verified=True)
    other = remember(store, "run-other", verified=True, question="When was Arthur's Magazine founded?")
    sample = plan_sample(learner.policy(), learner.manager, good, tools_text="search", settings=learner.episode_settings)
    prompt = learner.policy()._decode(sample.prompt_ids)
    assert prompt.endswith(PLAN_PREFILL) and QUESTION in prompt
    assert "(run-good)" not in prompt and "(run-other)" in prompt  # the other memory is shown, its own is not
    assert other.id != good.id
    completion = learner.policy()._decode(sample.completion_ids)
    assert completion.startswith(" Arthur's Magazine.\n2. Search for First for Women.")
    assert sample.completion_ids[-1] == learner.policy().tokenizer.eos_token_id
    assert plan_messages(QUESTION, "", "search")[0]["content"] in prompt  # the Planner's own system text


def test_a_plan_of_sub_questions_is_learned_as_the_planner_decomposes_and_a_plan_of_another_shape_is_not(
        make_learner, store):
    from dataclasses import replace

    from backend.prompts.planner import DECOMPOSE_PREFILL, DECOMPOSE_SYSTEM

    learner = make_learner(plan_shape="steps", learner="rft")
    hops = ("When was Arthur's Magazine started?", "When was First for Women started?")
    good = remember(store, "run-good", verified=True, subquestions=hops)
    remember(store, "run-other", verified=True, question="When was Arthur's Magazine founded?",
             subquestions=("In which year was Arthur's Magazine founded?",))
    steps = remember(store, "run-steps", verified=True, question="Who publishes First for Women?")
    shape = replace(learner.episode_settings, plan_shape="subquestions")
    sample = plan_sample(learner.policy(), learner.manager, good, tools_text="search", settings=shape)
    prompt = learner.policy()._decode(sample.prompt_ids)
    assert DECOMPOSE_SYSTEM in prompt and prompt.endswith(DECOMPOSE_PREFILL) and QUESTION in prompt
    # the other run's decomposition is its worked example; its own is what it learns, not what it reads
    assert "In which year was Arthur's Magazine founded?" in prompt and hops[1] not in prompt
    completion = learner.policy()._decode(sample.completion_ids)
    assert completion.startswith(f" {hops[0]}\n2. {hops[1]}")
    assert sample.completion_ids[-1] == learner.policy().tokenizer.eos_token_id
    # a run that planned in the other shape took another Planner turn: nothing to learn from it now
    assert plan_sample(learner.policy(), learner.manager, steps, tools_text="search", settings=shape) is None
    assert plan_sample(learner.policy(), learner.manager, good, tools_text="search",
                       settings=learner.episode_settings) is None
    learner.submit(Signal(QUESTION, "ground_truth", "alice", "Arthur's Magazine", "feedback:run-good"))
    assert learner.work_once() == "processed" and learner.batch == []
    assert learner.read_log("signals.jsonl")[-1]["note"] == (
        "its run's plan is not of the shape the Planner now writes (steps)")


def test_an_rft_update_raises_the_plans_likelihood(make_learner, store):
    from training.grpo import completion_logprobs

    learner = make_learner(plan_shape="steps", learner="rft", learning_rate=5e-3)
    policy = learner.policy()
    sample = plan_sample(policy, learner.manager, remember(store, "run-good", verified=True), tools_text="search",
                         settings=learner.episode_settings)
    with torch.no_grad():
        before = float(completion_logprobs(policy.model, sample, 1.0).sum())
    for _ in range(3):
        stats = rft_update(policy.model, learner._optimizer, [sample])
    with torch.no_grad():
        after = float(completion_logprobs(policy.model, sample, 1.0).sum())
    assert stats.tokens == len(sample.completion_ids) and after > before
    assert rft_update(policy.model, learner._optimizer, [TurnSample([1, 2], [])]).tokens == 0


def test_rft_learns_from_verified_plans_without_rollouts_and_promotes_through_the_canary(make_learner, store):
    promotions = []
    learner = make_learner(plan_shape="steps", learner="rft", signals_per_update=1, canary_tolerance=10.0, promotions=promotions)
    remember(store, "run-good", verified=True)
    remember(store, "run-unverified", verified=False)
    learner.submit(Signal(QUESTION, "ground_truth", "alice", "Arthur's Magazine", "feedback:run-unverified"))
    learner.submit(Signal(QUESTION, "ground_truth", "alice", "Arthur's Magazine", "feedback:run-good"))
    assert learner.work_once() == "processed" and learner.batch == []  # nothing verified to learn from
    assert learner.work_once() == "processed"  # one example: the batch is full, the update runs
    versions = learner.versions.all()
    assert [v.number for v in versions] == [0, 1] and versions[1].status == "promoted"
    assert versions[1].note.startswith("RFT on ") and versions[1].rollouts == 1
    assert [p.number for p in promotions] == [1]
    logged = learner.read_log("signals.jsonl")
    assert [entry["note"] for entry in logged] == ["no verified successful plan to learn from", ""]
    assert all(entry["answers"] == [] for entry in logged)  # no rollout ran
    assert learner.budget.allows(learner.settings.rollouts_per_hour)  # and none was spent
