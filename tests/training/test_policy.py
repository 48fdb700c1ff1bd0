"""The policy model records what it samples, and saves a folder the app can load."""

from __future__ import annotations

import torch

from backend.llm.embedded import EmbeddedChatModel
from training.policy import LoraSettings, PolicyChatModel, TurnSample

MESSAGES = [{"role": "user", "content": "Question: where is the Eiffel Tower?"}]


def test_recording_keeps_every_sampled_turn_and_choice(tiny_model_dir):
    torch.manual_seed(1)
    policy = PolicyChatModel(tiny_model_dir, lora=LoraSettings(r=4, alpha=8))
    policy.begin_episode()
    completion = policy.generate(MESSAGES, max_new_tokens=6, prefill="<think>")
    choice = policy.choose(MESSAGES, ["yes", "no"])
    samples = policy.end_episode()
    assert len(samples) == 2
    turn, decision = samples
    assert turn.prompt_ids == policy.prompt_ids(MESSAGES, "<think>")
    assert 1 <= len(turn.completion_ids) <= 6
    # the recorded ids are the sampled ones: decoding them gives the text (up to a turn-ending token)
    assert policy.tokenizer.decode(turn.completion_ids, skip_special_tokens=True).strip() == completion.text.strip()
    assert policy.tokenizer.decode(decision.completion_ids) == choice.label
    assert choice.method == "sampled-logprob"
    # outside an episode nothing is recorded and choices are greedy again
    assert policy.choose(MESSAGES, ["yes", "no"]).method == "logprob"
    assert policy.end_episode() == []


def test_lora_trains_only_adapters_and_saves_merged_and_adapter(tiny_model_dir, tmp_path):
    policy = PolicyChatModel(tiny_model_dir, lora=LoraSettings(r=4, alpha=8))
    trainable = policy.trainable_parameters()
    assert trainable and sum(p.numel() for p in trainable) < sum(p.numel() for p in policy.model.parameters()) / 4
    with torch.no_grad():
        for parameter in trainable:
            parameter.add_(0.05)  # stand-in for training: make the adapters non-zero
    folder = policy.save(tmp_path / "ckpt", display_name="tiny-grpo-test")
    assert (folder / "adapter" / "adapter_config.json").is_file()
    loaded = EmbeddedChatModel(folder)
    assert loaded.name == "embedded:tiny-grpo-test"
    ids = torch.tensor([policy.prompt_ids(MESSAGES)])
    with torch.no_grad():
        expected = policy.model(input_ids=ids).logits
        got = loaded.model(input_ids=ids).logits
    assert torch.allclose(expected, got, atol=1e-4)  # the merged folder computes what the adapter model did


def test_a_bfloat16_policy_trains_float32_adapters_and_learns(tiny_model_dir):
    """Half the memory of float32 weights: the base loads in bfloat16, the LoRA adapters stay float32,
    and a GRPO update still moves probability toward the rewarded turn."""
    from training.grpo import completion_logprobs, group_advantages, grpo_update

    torch.manual_seed(0)
    policy = PolicyChatModel(tiny_model_dir, lora=LoraSettings(r=4, alpha=8), dtype=torch.bfloat16)
    base = [p for name, p in policy.model.named_parameters() if "lora_" not in name]
    assert base and all(p.dtype == torch.bfloat16 and not p.requires_grad for p in base)
    assert all(p.dtype == torch.float32 for p in policy.trainable_parameters())
    prompt = policy.prompt_ids(MESSAGES, "<think>")
    good = TurnSample(prompt, policy.encode("</think><answer>Paris</answer>"))
    bad = TurnSample(prompt, policy.encode("</think><answer>Rome</answer>"))
    with torch.no_grad():
        before = [float(completion_logprobs(policy.model, s, 1.0).sum()) for s in (good, bad)]
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-2)
    advantages = group_advantages([1.0, 0.0], group_size=2)
    for _ in range(3):
        grpo_update(policy.model, optimizer, [([good], advantages[0]), ([bad], advantages[1])], temperature=1.0)
    with torch.no_grad():
        after = [float(completion_logprobs(policy.model, s, 1.0).sum()) for s in (good, bad)]
    assert after[0] > before[0] and after[1] < before[1]
    # Sampling runs on the bfloat16 weights too: the episode records what was sampled.
    policy.begin_episode()
    policy.generate(MESSAGES, max_new_tokens=4)
    assert len(policy.end_episode()) == 1
