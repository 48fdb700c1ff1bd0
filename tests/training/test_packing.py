"""Turns packed into one pass score exactly as one pass per turn: log-probabilities and gradients."""

from __future__ import annotations

import torch

from training.grpo import completion_logprobs
from training import packing
from training.packing import pack, packed_logprobs
from training.policy import LoraSettings, PolicyChatModel, TurnSample


def _samples(policy: PolicyChatModel) -> list[TurnSample]:
    plan_prompt = policy.encode("Plan how to find the city where the author of Dracula was born.")
    reflect_prompt = policy.encode("Plan how to find the city where the author of Dracula was born. 1. Search Dracula.")
    return [
        TurnSample(plan_prompt, policy.encode(" 1. Search for Dracula's author.")),
        TurnSample(plan_prompt, policy.encode(" 1. Search Bram Stoker's birthplace. 2. Answer.")),
        TurnSample(reflect_prompt, policy.encode(" yes")),
        TurnSample(plan_prompt, policy.encode(" 1. Look up Dublin.")),
        TurnSample(policy.encode("Another question entirely."), policy.encode(" Search it.")),
        TurnSample(plan_prompt, []),  # a turn that sampled nothing is scored nowhere
    ]


def test_samples_sharing_a_prompt_are_laid_out_once_within_the_token_budget(tiny_model_dir):
    policy = PolicyChatModel(tiny_model_dir, lora=None)
    samples = _samples(policy)
    packs = pack(samples, max_tokens=10_000)
    assert len(packs) == 1 and sorted(packs[0].members) == [0, 1, 2, 3, 4]
    assert len(packs[0].prompts) == 3  # the plan prompt once for its three turns
    distinct_prompts = {tuple(s.prompt_ids) for s in samples[:5]}
    assert packs[0].tokens == sum(map(len, distinct_prompts)) + sum(len(s.completion_ids) for s in samples)

    budget = len(samples[0].prompt_ids) + len(samples[0].completion_ids) + len(samples[1].completion_ids)
    small = pack(samples, max_tokens=budget)
    assert sorted(m for p in small for m in p.members) == [0, 1, 2, 3, 4]  # each turn exactly once
    assert all(p.tokens <= budget or len(p.members) == 1 for p in small)
    assert len(small) > 1


def test_packed_log_probabilities_and_gradients_equal_one_pass_per_turn(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(packing, "LOGIT_ROWS", 4)  # logits in several chunks, boundaries inside turns
    torch.manual_seed(0)
    policy = PolicyChatModel(tiny_model_dir, lora=LoraSettings(r=4, alpha=8))
    with torch.no_grad():  # a LoRA starts as a no-op: move it so that its gradient path is exercised
        for parameter in policy.trainable_parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    samples = _samples(policy)
    weights = [0.7, -1.3, 0.4, 2.0, -0.5, 1.0]
    parameters = policy.trainable_parameters()

    def gradients(loss: torch.Tensor) -> list[torch.Tensor]:
        return [g.clone() for g in torch.autograd.grad(loss, parameters)]

    separate = [completion_logprobs(policy.model, s, 0.9) for s in samples[:5]]
    expected = gradients(sum(w * lp.sum() for w, lp in zip(weights, separate)))
    for budget in (10_000, 40):  # one pack, and several
        packs = pack(samples, max_tokens=budget)
        packed: dict[int, torch.Tensor] = {}
        for p in packs:
            packed.update(zip(p.members, packed_logprobs(policy.model, p, 0.9)))
        assert sorted(packed) == [0, 1, 2, 3, 4]
        for index, logprobs in enumerate(separate):
            assert torch.allclose(packed[index], logprobs, atol=1e-5), index
        found = gradients(sum(weights[i] * lp.sum() for i, lp in packed.items()))
        # float32 sums taken in another order: within 1e-5 of each gradient's scale
        assert all(float((a - b).abs().max()) <= 1e-5 * float(b.abs().max()) for a, b in zip(found, expected))
