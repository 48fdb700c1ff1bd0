"""What the two in-process backends (transformers and llama.cpp) share: generate() through
stream(), choose() through score_options(), and the checks before a prompt is decoded."""

from __future__ import annotations

from collections.abc import Sequence

from backend.llm.base import Choice, Completion, LLMError, check_options


class InProcessChatModel:
    """Subclasses provide prompt_ids(), stream(), score_options() and `context_length`."""

    context_length: int

    def generate(
        self,
        messages: list[dict],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        prefill: str = "",
        temperature: float = 0.0,
        logprobs: int | None = None,
    ) -> Completion:
        """Complete the assistant turn; `logprobs=k` also records each token's top-k alternatives.
        Goes through stream(), which subclasses (the training policy) extend."""
        final = None
        for item in self.stream(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill,
                                temperature=temperature, logprobs=logprobs):
            if isinstance(item, Completion):
                final = item
        assert final is not None
        return final

    def choose(self, messages: list[dict], options: Sequence[str], *, prefill: str = "") -> Choice:
        options = check_options(options)
        scored = self.score_options(messages, options, prefill=prefill)
        sums = {option: sum(t.logprob for t in tokens) for option, tokens in zip(options, scored)}
        best = max(options, key=lambda option: sums[option])  # ties go to the earlier option
        return Choice(label=best, logprobs=sums, method="logprob")

    def _prepare(
        self, messages: list[dict], max_new_tokens: int, stop: Sequence[str], prefill: str, temperature: float
    ) -> tuple[list[int], int, list[str]]:
        """The prompt's token ids, the token budget left in the context, the stop strings; or a clear error."""
        if max_new_tokens < 1:
            raise LLMError(f"max_new_tokens must be at least 1; got {max_new_tokens}.")
        if temperature < 0:
            raise LLMError(f"temperature must be 0 (greedy) or positive; got {temperature}.")
        stops = [s for s in stop if s]
        prompt_ids = self.prompt_ids(messages, prefill)
        budget = min(max_new_tokens, self.context_length - len(prompt_ids))
        if budget < 1:
            raise LLMError(
                f"The prompt has {len(prompt_ids)} tokens, which fills the model's context of "
                f"{self.context_length}; shorten the conversation or the retrieved text."
            )
        return prompt_ids, budget, stops
