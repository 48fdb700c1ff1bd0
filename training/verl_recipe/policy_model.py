"""verl's rollout server as a ChatModel, so the app's episode loop runs inside a verl agent loop.

The episode loop (backend.episode) is synchronous; a verl agent loop is a coroutine. The agent loop
runs the episode in a worker thread, and this model hands each call back to the agent loop's event
loop, where the server generates token ids.

It records the trajectory verl trains on: the first generation starts it (its messages through the
chat template are the prompt), and every later generation whose messages extend that conversation
appends to it: the new user turns as context (mask 0), a prefill as context (mask 0), the generated
tokens with their log-probabilities (mask 1). Other calls (the reader, a constrained choice, a
second role's prompt) are sampled from the same policy but stay off the trajectory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput

from backend.llm.base import Choice, Completion, ModelTraits


class VerlPolicyModel:
    supports_images = False

    def __init__(self, agent_loop: AgentLoopBase, sampling_params: dict[str, Any], request_id: str, *,
                 context_tokens: int) -> None:
        self.agent_loop, self.sampling_params, self.request_id = agent_loop, dict(sampling_params), request_id
        self.tokenizer = agent_loop.tokenizer
        self.name = "verl:policy"
        # Not small: the conversation then only grows (every result stays in full), so it is one sequence.
        self.traits = ModelTraits(small=False, guided_turns=False, context_tokens=context_tokens, executor_turns=8)
        self.messages: list[dict] | None = None  # the trajectory's conversation as the policy saw it
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []  # aligned with mask: 0.0 for context tokens
        self.has_logprobs = False  # whether the server returned them
        self.turns = 0

    # -- bridging to the agent loop's event loop ------------------------------------------------
    def _await(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.agent_loop.loop).result()

    def _extends(self, messages: list[dict]) -> bool:
        known = self.messages or []
        return (self.messages is not None and len(messages) > len(known) and messages[: len(known)] == known
                and all(m["role"] != "assistant" for m in messages[len(known):]))

    async def _prompt(self, messages: list[dict]) -> tuple[list[int], bool]:
        """The prompt ids of a call and whether the call is on the trajectory."""
        loop = self.agent_loop
        if self.messages is None:
            self.messages = [dict(m) for m in messages]
            self.ids = await loop.ct_build_initial_tokens(self.messages)
            return self.ids, True
        if self._extends(messages):
            updated = self.messages + [dict(m) for m in messages[len(self.messages):]]
            merged, self.mask, logprobs = await loop.ct_merge_context_msg(
                self.messages, updated, self.ids, self.mask, self.logprobs)
            self.messages, self.ids, self.logprobs = updated, merged.token_ids, logprobs
            self.turns += 1
            return self.ids, True
        return await loop.ct_build_initial_tokens(messages), False

    async def _generate(self, messages: list[dict], max_new_tokens: int, stop: Sequence[str], prefill: str,
                        temperature: float | None) -> tuple[str, list[int], list[float], bool]:
        prompt_ids, on_trajectory = await self._prompt(messages)
        prefill_ids = self.tokenizer.encode(prefill, add_special_tokens=False) if prefill else []
        params = {**self.sampling_params, "max_tokens": max_new_tokens}
        if temperature is not None:
            params["temperature"] = temperature
        if stop:
            params.update(stop=list(stop), include_stop_str_in_output=True)
        output = await self.agent_loop.server_manager.generate(
            request_id=self.request_id, prompt_ids=list(prompt_ids) + prefill_ids, sampling_params=params)
        token_ids = list(output.token_ids)
        logprobs = list(output.log_probs or [])
        text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
        if on_trajectory:
            self.has_logprobs = self.has_logprobs or bool(logprobs)
            self.ids = self.ids + prefill_ids
            self.mask = self.mask + [0] * len(prefill_ids)
            self.logprobs = self.logprobs + [0.0] * len(prefill_ids)
            merged, self.mask, self.logprobs = await self.agent_loop.ct_merge_assistant_token(
                self.ids, token_ids, self.mask, self.logprobs, assistant_logprobs=logprobs or [0.0] * len(token_ids))
            self.ids = merged.token_ids
            self.messages.append({"role": "assistant", "content": prefill + text})
            self.turns += 1
        return text, token_ids, logprobs, on_trajectory

    # -- the ChatModel contract -----------------------------------------------------------------
    def generate(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (), prefill: str = "",
                 temperature: float | None = None) -> Completion:
        started = time.perf_counter()
        text, token_ids, _, _ = self._await(self._generate(messages, max_new_tokens, stop, prefill, temperature))
        finish = "length" if len(token_ids) >= max_new_tokens else "stop"
        for s in stop:  # the contract: the text without its stop string (the trajectory keeps it)
            if s and s in text:
                text, finish = text[: text.index(s)], "stop"
        return Completion(text=text, prompt_tokens=0, completion_tokens=len(token_ids),
                          seconds=time.perf_counter() - started, finish_reason=finish)

    def stream(self, messages: list[dict], **kwargs) -> Iterator[str | Completion]:
        completion = self.generate(messages, **kwargs)
        yield completion.text
        yield completion

    def choose(self, messages: list[dict], options: Sequence[str], *, prefill: str = "") -> Choice:
        """A sampled choice: the policy writes a few tokens and the option they begin is taken (the
        first option when they begin none)."""
        longest = max(len(self.tokenizer.encode(o, add_special_tokens=False)) for o in options)
        text, _, logprobs, _ = self._await(self._generate(messages, longest + 1, (), prefill, None))
        written = text.strip().lower()
        label = next((o for o in options if written.startswith(o.lower())), options[0])
        return Choice(label=label, logprobs={label: sum(logprobs)}, method="sampled")

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    # -- what verl trains on --------------------------------------------------------------------
    def output(self, response_length: int, reward: float | None = None, **extra_fields: Any) -> AgentLoopOutput:
        if self.messages is None:
            raise RuntimeError("the episode never generated with the policy, so there is no trajectory to train on")
        prompt_length = len(self.ids) - len(self.mask)
        return AgentLoopOutput(
            prompt_ids=self.ids[:prompt_length],
            response_ids=self.ids[prompt_length:][:response_length],
            response_mask=self.mask[:response_length],
            response_logprobs=self.logprobs[:response_length] if self.has_logprobs else None,
            reward_score=reward,
            num_turns=self.turns + 1,
            metrics={},
            extra_fields=extra_fields,
        )
