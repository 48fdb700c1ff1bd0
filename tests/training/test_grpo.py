"""GRPO pieces: our advantages agree with verl's own GRPO code; an update moves the real model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from training.grpo import completion_logprobs, group_advantages, grpo_update
from training.policy import PolicyChatModel, TurnSample


@pytest.mark.verl
def test_group_advantages_match_verl_grpo():
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    rewards = [1.04, 0.2, 0.2, 0.0, 0.3, 0.3, 0.3, 0.3, 0.9, 0.1, 0.5, 0.7]
    ours = group_advantages(rewards, group_size=4)
    # verl puts the scalar reward on the last response token and groups rollouts by uid
    token_rewards = torch.zeros(len(rewards), 5)
    token_rewards[:, -1] = torch.tensor(rewards)
    index = np.array([f"q{i // 4}" for i in range(len(rewards))], dtype=object)
    verl_advantages, _ = compute_grpo_outcome_advantage(token_rewards, torch.ones(len(rewards), 5), index)
    assert ours == pytest.approx(verl_advantages[:, 0].tolist(), abs=1e-5)
    assert ours[4:8] == [0.0, 0.0, 0.0, 0.0]  # a group that scored alike teaches nothing


def test_group_advantages_reject_ragged_groups():
    with pytest.raises(ValueError, match="groups of 4"):
        group_advantages([1.0, 0.0, 1.0], group_size=4)


def test_update_raises_the_log_probability_of_a_rewarded_turn(tiny_model_dir):
    torch.manual_seed(0)
    policy = PolicyChatModel(tiny_model_dir, lora=None)
    messages = [{"role": "user", "content": "Question: who wrote Hamlet?"}]
    prompt = policy.prompt_ids(messages, "<think>")
    good = TurnSample(prompt, policy.encode("</think><answer>Shakespeare</answer>"))
    bad = TurnSample(prompt, policy.encode("</think><answer>Dickens</answer>"))
    with torch.no_grad():
        before_good = float(completion_logprobs(policy.model, good, 1.0).sum())
        before_bad = float(completion_logprobs(policy.model, bad, 1.0).sum())
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-3)
    advantages = group_advantages([1.0, 0.0], group_size=2)
    for _ in range(3):
        stats = grpo_update(policy.model, optimizer, [([good], advantages[0]), ([bad], advantages[1])], temperature=1.0)
    assert stats.tokens == len(good.completion_ids) + len(bad.completion_ids)
    with torch.no_grad():
        assert float(completion_logprobs(policy.model, good, 1.0).sum()) > before_good
        assert float(completion_logprobs(policy.model, bad, 1.0).sum()) < before_bad


def test_update_with_no_signal_changes_nothing(tiny_model_dir):
    policy = PolicyChatModel(tiny_model_dir, lora=None)
    sample = TurnSample(policy.encode("hello"), policy.encode(" world"))
    weights = [p.detach().clone() for p in policy.trainable_parameters()]
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-2)
    stats = grpo_update(policy.model, optimizer, [([sample], 0.0), ([sample], 0.0)], temperature=1.0)
    assert stats.tokens == 0
    assert all(torch.equal(a, b) for a, b in zip(weights, policy.trainable_parameters()))


def test_the_update_recomputes_layers_and_computes_logits_only_for_sampled_tokens(tiny_model_dir):
    """Where a long prompt's memory went: every layer's activations kept for the backward pass, and a
    vocabulary-wide logit row per prompt token. The update keeps neither, and computes the same values.
    Turns that share a prompt are scored in one pass (training.packing)."""
    from training.policy import LoraSettings

    policy = PolicyChatModel(tiny_model_dir, lora=LoraSettings(r=4, alpha=8))
    prompt = policy.encode("Plan how to find who wrote Kiss and Tell. " * 20)
    sample = TurnSample(prompt, policy.encode(" Search for the film's writer."))
    model = policy.model
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + sample.completion_ids])).logits[0, len(prompt) - 1: -1]
        expected = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(sample.completion_ids)[:, None])
        assert torch.allclose(completion_logprobs(model, sample, 1.0), expected.squeeze(1), atol=1e-5)

    head_rows, layer_calls = [], []
    layers = model.get_base_model().model.layers
    hooks = [model.get_output_embeddings().register_forward_hook(lambda _m, args, _o: head_rows.append(args[0].shape[-2]))]
    hooks += [layer.register_forward_pre_hook(lambda *_: layer_calls.append(1)) for layer in layers]
    try:
        optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-3)
        grpo_update(model, optimizer, [([sample], 1.0), ([sample], -1.0)], temperature=1.0)
    finally:
        for hook in hooks:
            hook.remove()
    # both turns in one packed pass (they share the prompt), logits at their sampled positions only,
    # computed again in the backward pass instead of kept
    assert head_rows == [2 * len(sample.completion_ids)] * 2
    assert len(layer_calls) == 2 * len(layers)  # each layer again in the backward pass (gradient checkpointing)


def test_the_same_turn_in_several_rollouts_is_scored_once_and_counted_each_time(tiny_model_dir):
    """Two rollouts that sampled the same plan and scored alike: one pass for it, the same step as
    scoring each copy (the loss written out term by term on an identical copy of the model)."""
    from training.grpo import same_turns_once
    from training.policy import LoraSettings

    torch.manual_seed(0)
    policy = PolicyChatModel(tiny_model_dir, lora=LoraSettings(r=4, alpha=8))
    torch.manual_seed(0)
    reference = PolicyChatModel(tiny_model_dir, lora=LoraSettings(r=4, alpha=8))
    prompt = policy.prompt_ids([{"role": "user", "content": "Plan: who wrote Hamlet?"}], "")
    same = TurnSample(prompt, policy.encode("1. Search Hamlet author"))
    other = TurnSample(prompt, policy.encode("1. Search Dickens novels"))
    episodes = [([same], 0.8), ([same], 0.8), ([other], -1.6), ([same], -0.4)]
    distinct, copies = same_turns_once([(s[0], a) for s, a in episodes])
    assert copies == [2, 1, 1] and [a for _, a in distinct] == [0.8, -1.6, -0.4]

    before = [p.detach().clone() for p in policy.trainable_parameters()]
    stats = grpo_update(policy.model, torch.optim.SGD(policy.trainable_parameters(), lr=0.5), episodes,
                        temperature=1.0, max_grad_norm=1e9)
    tokens = 3 * len(same.completion_ids) + len(other.completion_ids)
    assert stats.tokens == tokens
    # The reference: every rollout's turn a term of its own. In a single update the ratio is 1 and
    # its gradient is that of the log-probability, so the loss is -advantage * log-probability.
    optimizer = torch.optim.SGD(reference.trainable_parameters(), lr=0.5)
    reference.model.train()
    loss = sum(-advantage * completion_logprobs(reference.model, samples[0], 1.0).sum() for samples, advantage in episodes)
    (loss / tokens).backward()
    optimizer.step()
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.trainable_parameters()))
    for ours, theirs in zip(policy.trainable_parameters(), reference.trainable_parameters()):
        assert torch.allclose(ours, theirs, atol=1e-6)


def test_a_seeded_policy_samples_the_same_rollout_whatever_else_drew_from_torch(tiny_model_dir):
    """The learner's rollouts must not depend on what ran before them in the process (an app's answers,
    another test): a seeded policy samples from its own generator."""
    messages = [{"role": "user", "content": "Question: who wrote Hamlet?"}]

    def rollout(policy: PolicyChatModel, draws_between: int) -> list[list[int]]:
        torch.rand(draws_between)  # whatever else ran in the process
        policy.begin_episode()
        policy.generate(messages, max_new_tokens=12)
        policy.choose(messages, ["alpha", "beta", "gamma", "delta"])
        return [sample.completion_ids for sample in policy.end_episode()]

    seeded = [rollout(PolicyChatModel(tiny_model_dir, lora=None, seed=7), draws) for draws in (0, 1000)]
    assert seeded[0] == seeded[1] and len(seeded[0]) == 2 and len(seeded[0][0]) == 12
    unseeded = PolicyChatModel(tiny_model_dir, lora=None)
    torch.manual_seed(0)
    first = rollout(unseeded, 0)
    torch.manual_seed(1)
    assert rollout(unseeded, 0) != first  # without a seed the global generator decides: the test could tell
