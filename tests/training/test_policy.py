"""The policy model records what it samples, and saves a folder the app can load."""

from __future__ import annotations

import torch

from backend.llm.embedded import EmbeddedChatModel
from training.policy import LoraSettings, PolicyChatModel

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
