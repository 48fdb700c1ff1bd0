"""A ChatModel that replays written outputs, for flows a real small model cannot be made to follow
on demand (a replan after a wrong answer, a planted instruction being ignored). It records every
prompt it was shown so tests can assert on what the model read."""

from __future__ import annotations

import json
from collections import deque
from typing import Iterator, Sequence

from backend.llm.base import Choice, Completion, ModelTraits


class ScriptedChatModel:
    supports_images = False
    traits = ModelTraits(small=True, guided_turns=True, executor_turns=8)  # stands in for the small embedded model of the tests' configs

    def __init__(self, name: str, outputs: Sequence[str] = (), choices: Sequence[str] = ()) -> None:
        self.name = f"scripted:{name}"
        self.outputs = deque(outputs)
        self.choices = deque(choices)
        self.prompts: list[list[dict]] = []

    def generate(self, messages, *, max_new_tokens=256, stop=(), prefill="", temperature=0.0) -> Completion:
        self.prompts.append(messages)
        text = self.outputs.popleft() if self.outputs else ""
        if text.startswith(prefill):
            text = text[len(prefill):]
        for s in stop:
            if s in text:
                text = text[: text.index(s)]
        return Completion(text=text, prompt_tokens=sum(len(m["content"].split()) for m in messages),
                          completion_tokens=len(text.split()), seconds=0.0, finish_reason="stop")

    def stream(self, messages, **kwargs) -> Iterator[str | Completion]:
        completion = self.generate(messages, **kwargs)
        yield completion.text
        yield completion

    def choose(self, messages, options, *, prefill="") -> Choice:
        self.prompts.append(messages)
        wanted = self.choices.popleft() if self.choices else options[0]
        # The reader scores options after their leading space (" yes"); a script names the label.
        label = next((o for o in options if o.strip() == wanted.strip()), None)
        assert label is not None, f"scripted choice {wanted!r} not among {options}"
        return Choice(label=label, logprobs={o: (0.0 if o == label else -5.0) for o in options}, method="scripted")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def tool_call_turn(name: str, **arguments) -> str:
    """An Executor turn that calls a tool, as the protocol writes it."""
    return f"<think>next step</think><tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def answer_turn(text: str) -> str:
    """An Executor turn that answers."""
    return f"<think>enough evidence</think><answer>{text}</answer>"
