"""The Planner's rollouts sampled on llama.cpp, for the trained copy to score.

Sampling on the float32/bfloat16 transformers copy runs at about 2.3 tokens/s on this CPU; llama.cpp
serves the same model at about 15. As verl and TRL do with a fast sampler beside the trainer, the
rollouts are sampled on llama.cpp with the Planner version's LoRA adapter (converted to GGUF once,
backend/llm/adapters.py) and recorded as token ids (`TurnSample`); GRPO then computes the
log-probabilities it needs with teacher-forced passes of the trained copy over the recorded turns
(training.packing). Both read the same GGUF's vocabulary, so the ids carry over.
Constrained choices are sampled from the options' summed log-probabilities, as the trained copy's
policy samples them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence

from backend.llm.base import Choice, Completion, check_options
from backend.llm.llamacpp import LlamaCppChatModel
from training.policy import TurnSample


class LlamaCppPolicy:
    """A ChatModel that samples on llama.cpp at the policy's temperature while an episode is recorded
    (begin_episode ... end_episode, as training.policy.PolicyChatModel), and answers like the plain
    model otherwise."""

    def __init__(self, model: LlamaCppChatModel, *, temperature: float = 1.0, seed: int = 0) -> None:
        self.model = model
        self.temperature = temperature
        self.name = model.name
        self.supports_images = model.supports_images
        self.traits = model.traits
        self._recording: list[TurnSample] | None = None
        self._rng = random.Random(seed)

    def begin_episode(self) -> None:
        self._recording = []

    def end_episode(self) -> list[TurnSample]:
        samples, self._recording = self._recording or [], None
        return samples

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    def generate(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
                 prefill: str = "", temperature: float = 0.0) -> Completion:
        if self._recording is None:
            return self.model.generate(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill,
                                       temperature=temperature)
        completion, prompt_ids, sampled = self.model.sample_ids(
            messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill, temperature=self.temperature)
        if sampled:
            self._recording.append(TurnSample(prompt_ids, sampled))
        return completion

    def stream(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
               prefill: str = "", temperature: float = 0.0) -> Iterator[str | Completion]:
        if self._recording is None:
            yield from self.model.stream(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill,
                                         temperature=temperature)
            return
        completion = self.generate(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill)
        if completion.text:
            yield completion.text
        yield completion

    def choose(self, messages: list[dict], options: Sequence[str], *, prefill: str = "") -> Choice:
        if self._recording is None:
            return self.model.choose(messages, options, prefill=prefill)
        options = check_options(options)
        scored = self.model.score_options(messages, options, prefill=prefill)
        sums = [sum(t.logprob for t in tokens) for tokens in scored]
        top = max(sums)
        weights = [math.exp((s - top) / self.temperature) for s in sums]
        index = self._rng.choices(range(len(options)), weights=weights)[0]
        prompt_ids = self.model.prompt_ids(messages, prefill)
        option_ids = self.model._continuation_ids(messages, prefill, prompt_ids, options[index])
        self._recording.append(TurnSample(prompt_ids, option_ids))
        return Choice(label=options[index], logprobs=dict(zip(options, sums)), method="sampled-logprob")
