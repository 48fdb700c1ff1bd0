"""A chat model that answers a greedy call it has already made from what it returned then.

Test-time learning runs several rollouts of one question with a frozen Executor: where two sampled
plans lead the Executor to the same prompt (a one-hop plan of sub-questions is never shown to it, so
every such rollout asks the same first turns), the greedy answer is the same, and computing it again
costs seconds of a 2-core CPU for nothing. The canary is the same case across versions: a version that
plans a canary question as its parent did sends the Executor its parent's prompts. Sampled calls
(temperature > 0) are always made.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import replace

from backend.llm.base import ChatModel, Choice, Completion


class RepeatedCalls:
    """Wraps `model`; every attribute but the three calls is the model's own. Holds at most
    `max_entries` answers, the oldest dropped first; one instance should live as long as the calls
    it may repeat and the model stays the same (one question's rollouts; the canary's questions across
    Planner versions, the Executor being frozen), not longer."""

    def __init__(self, model: ChatModel, max_entries: int = 512) -> None:
        self.model = model
        self.max_entries = max_entries
        self.hits = 0
        self._answers: OrderedDict[str, Completion | Choice] = OrderedDict()

    def __getattr__(self, name: str):
        return getattr(self.model, name)

    def generate(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
                 prefill: str = "", temperature: float = 0.0) -> Completion:
        if temperature > 0:
            return self.model.generate(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill,
                                       temperature=temperature)
        key = _key("generate", messages, max_new_tokens, list(stop), prefill)
        known = self._recall(key)
        if known is not None:
            return _repeated(known)
        completion = self.model.generate(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill)
        self._keep(key, completion)
        return completion

    def stream(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
               prefill: str = "", temperature: float = 0.0) -> Iterator[str | Completion]:
        if temperature > 0:
            yield from self.model.stream(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill,
                                         temperature=temperature)
            return
        # A streamed and a generated turn of the same prompt are the same greedy text.
        key = _key("generate", messages, max_new_tokens, list(stop), prefill)
        known = self._recall(key)
        if known is not None:
            if known.text:
                yield known.text
            yield _repeated(known)
            return
        for part in self.model.stream(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill):
            if isinstance(part, Completion):
                self._keep(key, part)
            yield part

    def choose(self, messages: list[dict], options: Sequence[str], *, prefill: str = "") -> Choice:
        key = _key("choose", messages, list(options), prefill)
        known = self._recall(key)
        if known is not None:
            return known
        choice = self.model.choose(messages, options, prefill=prefill)
        self._keep(key, choice)
        return choice

    def _recall(self, key: str):
        known = self._answers.get(key)
        if known is not None:
            self.hits += 1
            self._answers.move_to_end(key)
        return known

    def _keep(self, key: str, answer: Completion | Choice) -> None:
        self._answers[key] = answer
        while len(self._answers) > self.max_entries:
            self._answers.popitem(last=False)


def _key(*parts) -> str:
    return json.dumps(parts, sort_keys=True, default=repr)


def _repeated(completion: Completion) -> Completion:
    """The answer again, costing nothing: no seconds, every prompt token found."""
    return replace(completion, seconds=0.0, cached_tokens=completion.prompt_tokens)
