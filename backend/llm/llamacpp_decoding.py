"""The llama.cpp model's decoding (backend.llm.llamacpp): a slot's cache brought to a prompt,
re-reading only what follows its cached prefix, then tokens drawn one by one (greedy or sampled,
the model's own repeats penalised) with their log-probabilities when asked for."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from backend.llm.base import TokenLogprob
from backend.llm.llamacpp_slots import Slot, common_prefix


class SlotDecoding:
    """Part of LlamaCppChatModel, which sets `batch_tokens`, `repetition_penalty`, `_compute`,
    `_vocab_size`, `_rng`, `_stats_lock` and the prompt-token counters (and whose TemplatePrompts
    gives `_detokenize`)."""

    def _feed(self, slot: Slot, ids: list[int], *, all_new: bool = False, is_prompt: bool = True) -> np.ndarray:
        """Bring the slot's cache to `ids`, re-reading only what follows the cached prefix. Returns the
        logits after the last token, or (all_new) one row per token read here. `is_prompt`: counted in
        cache_stats (a generated token fed back is not a prompt)."""
        keep = common_prefix(slot.tokens, ids)
        if keep == len(ids):
            keep -= 1  # the last token runs again: its logits are what the caller needs
        if not slot.context.kv_cache_seq_rm(-1, keep, -1):
            slot.context.kv_cache_clear()
            keep = 0
        del slot.tokens[keep:]
        new = ids[keep:]
        if is_prompt:
            slot.reused = keep
            with self._stats_lock:
                self.prompt_tokens_total += len(ids)
                self.prompt_tokens_cached += keep
        rows = []
        for start in range(0, len(new), self.batch_tokens):
            chunk = new[start:start + self.batch_tokens]
            slot.batch.set_batch(batch=chunk, n_past=len(slot.tokens), logits_all=all_new)
            with self._compute:
                slot.context.decode(slot.batch)
            slot.tokens.extend(chunk)
            if all_new:
                rows += [self._logits(slot, i) for i in range(len(chunk))]
        return np.stack(rows) if all_new else self._logits(slot, -1)

    def _logits(self, slot: Slot, index: int) -> np.ndarray:
        pointer = slot.context.get_logits_ith(index)
        return np.ctypeslib.as_array(pointer, shape=(self._vocab_size,)).astype(np.float32)

    def _penalise_repeats(self, logits: np.ndarray, generated: list[int]) -> np.ndarray:
        # Only the model's own output is penalised: copying names from the prompt must stay cheap.
        if self.repetition_penalty == 1.0 or not generated:
            return logits
        index = np.array(sorted(set(generated)))
        logits = logits.copy()
        chosen = logits[index]
        logits[index] = np.where(chosen > 0, chosen / self.repetition_penalty, chosen * self.repetition_penalty)
        return logits

    def _next_tokens(
        self, slot: Slot, prompt_ids: list[int], budget: int, temperature: float, top_k: int | None
    ) -> Iterator[tuple[int, TokenLogprob | None]]:
        logits = self._feed(slot, prompt_ids)
        generated: list[int] = []
        for _ in range(budget):
            scores = self._penalise_repeats(logits, generated)
            if temperature > 0:
                scaled = scores / temperature
                probabilities = np.exp(scaled - scaled.max())
                probabilities /= probabilities.sum()
                token_id = int(self._rng.choice(len(probabilities), p=probabilities))
            else:
                token_id = int(np.argmax(scores))
            detail = self._token_logprob(log_softmax(logits), token_id, top_k) if top_k is not None else None
            yield token_id, detail
            generated.append(token_id)
            logits = self._feed(slot, slot.tokens + [token_id], is_prompt=False)

    def _token_logprob(self, dist: np.ndarray, token_id: int, top_k: int) -> TokenLogprob:
        top: list[tuple[str, float]] = []
        if top_k:
            best = np.argpartition(-dist, top_k)[:top_k]
            best = best[np.argsort(-dist[best])]
            top = [(self._detokenize([int(i)]), float(dist[i])) for i in best]
        return TokenLogprob(token=self._detokenize([token_id]), logprob=float(dist[token_id]), top=top)

    def cache_stats(self) -> dict[str, int]:
        """Prompt tokens asked for and how many of them the slots' caches already held."""
        with self._stats_lock:
            return {"prompt_tokens": self.prompt_tokens_total, "cached_tokens": self.prompt_tokens_cached}


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


def recorded(tokens: Iterator[tuple[int, TokenLogprob | None]], sampled: list[int]):
    for token_id, detail in tokens:
        sampled.append(token_id)
        yield token_id, detail
