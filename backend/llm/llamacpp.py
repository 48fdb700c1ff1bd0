"""A chat model on llama.cpp (llama-cpp-python): a quantised GGUF run on CPU inside this process.

The capable default (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M) runs here. Prompt processing is what
costs on a CPU, so the model keeps several *slots*: llama.cpp contexts over the one loaded model,
each with its own KV cache. A call takes the free slot whose cached tokens share the longest
prefix with its prompt and pays only for the tokens after that prefix, so an Executor's next turn
(the same conversation plus one turn) re-reads nothing. Calls from several users run in different
slots at once and all make progress; one more caller than slots waits for the first to finish.
The slots take turns at the CPU: each decode step (a prompt chunk or one generated token) passes a
first-come gate that lets as many steps compute at once as the cores hold `threads`-thread steps,
so several users' calls interleave step by step instead of oversubscribing the cores.

Message text is tokenised without special tokens, so a passage containing "<|im_end|>" stays
text: only the chat template's own markup becomes control tokens.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from backend.llm.base import (
    Completion,
    LLMError,
    ModelTraits,
    TokenLogprob,
    check_messages,
    check_options,
)
from backend.llm.decoding import collect_text, stream_in_thread
from backend.llm.local import InProcessChatModel
from backend.llm.gguf_import import display_name
from backend.llm.gguf_metadata import read_gguf_metadata

SMALL_MODEL_PARAMETERS = 1_000_000_000  # below this a model is "small" unless the role says otherwise
USEFUL_PREFIX_TOKENS = 64  # a shorter shared prefix is only the chat template's opening
IDLE_CACHE_SECONDS = 120.0  # a cache unused this long belongs to a finished question
_SENTINEL = "\x00mia-content-{}\x00"


class _Slot:
    """One llama.cpp context over the shared model: its KV cache holds `tokens`."""

    def __init__(self, context, batch) -> None:
        self.context, self.batch = context, batch
        self.tokens: list[int] = []
        self.reused = 0  # prompt tokens the last prompt found in this cache
        self.last_used = 0.0

    def keep_value(self, now: float) -> int:
        """What evicting this cache would cost: its tokens, or nothing once it has sat idle a while."""
        return len(self.tokens) if now - self.last_used < IDLE_CACHE_SECONDS else 0


class _SlotPool:
    def __init__(self, slots: list[_Slot]) -> None:
        self._free = list(slots)
        self._size = len(slots)
        self._ready = threading.Condition()
        self.closed_because = ""  # set by close_all: what a caller is told instead of a slot

    def acquire(self, prompt_ids: list[int]) -> _Slot:
        """The free slot whose cache shares the longest prefix with `prompt_ids` (waits for one). A
        prompt that continues no cache (a reader or Planner prompt between an Executor's turns) takes
        the slot that is cheapest to lose, so the Executor's conversation stays cached."""
        with self._ready:
            while not self._free and not self.closed_because:
                self._ready.wait()
            if self.closed_because:
                raise LLMError(self.closed_because)
            now = time.monotonic()
            shared = {id(slot): _common_prefix(slot.tokens, prompt_ids) for slot in self._free}
            best = max(self._free, key=lambda slot: shared[id(slot)])
            if shared[id(best)] < USEFUL_PREFIX_TOKENS:
                best = min(self._free, key=lambda slot: slot.keep_value(now))
            self._free.remove(best)
            return best

    def release(self, slot: _Slot) -> None:
        with self._ready:
            slot.last_used = time.monotonic()
            self._free.append(slot)
            self._ready.notify()

    def close_all(self, reason: str) -> None:
        """Wait until every slot is back (no call is decoding in one), then refuse further calls."""
        with self._ready:
            while len(self._free) < self._size:
                self._ready.wait()
            self._free = []
            self.closed_because = reason
            self._ready.notify_all()


def _free_sibling(lib, slots: list[_Slot], adapter) -> None:
    """An adapter sibling's native memory: its contexts and batches, then its adapter (weakref.finalize
    runs this at most once; it must not refer to the sibling)."""
    for slot in slots:
        slot.context.close()
        slot.batch.close()
    lib.llama_adapter_lora_free(adapter)


class _ComputeGate:
    """At most `width` holders at once, admitted in the order they asked. A plain semaphore lets the
    thread that just released take it straight back, so one user's token loop would starve the rest."""

    def __init__(self, width: int) -> None:
        self._free = width
        self._waiting: deque[threading.Event] = deque()
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            turn = threading.Event()
            self._waiting.append(turn)
        turn.wait()  # the releasing holder handed its place to this waiter

    def __exit__(self, *exc) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._free += 1


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


class LlamaCppChatModel(InProcessChatModel):
    supports_images = False  # callers put an image caption in the text; the "image" key is ignored
    supports_logprobs = True

    def __init__(
        self,
        gguf_path: Path,
        *,
        name: str | None = None,
        threads: int = 0,
        context_tokens: int = 4096,
        slots: int = 4,
        batch_tokens: int = 256,
        repetition_penalty: float = 1.1,
        small: bool | None = None,
        seed: int = 0,
    ) -> None:
        gguf_path = Path(gguf_path)
        if not gguf_path.is_file():
            raise LLMError(f"The GGUF file {gguf_path} does not exist; run `make prepare` or fix the role's model_file.")
        if slots < 1:
            raise LLMError(f"slots must be at least 1; got {slots}.")
        if repetition_penalty <= 0:
            raise LLMError(f"repetition_penalty must be positive (1.0 = off); got {repetition_penalty}.")
        try:
            from llama_cpp import Llama, llama_cpp
        except ImportError:
            raise LLMError(
                "llama-cpp-python is not installed; run `make install` (it builds llama-cpp-python once, "
                "about 10 minutes) or set the roles' backend to \"embedded\" (SmolLM2) or \"openai\"."
            ) from None
        self._llama_cpp = llama_cpp
        cores = os.cpu_count() or 1
        threads = threads or cores
        try:
            self._llama = Llama(
                model_path=str(gguf_path), n_ctx=context_tokens, n_batch=batch_tokens, n_ubatch=batch_tokens,
                n_threads=threads, n_threads_batch=threads, seed=seed, verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise LLMError(f"llama.cpp could not load {gguf_path} ({exc}); check that it is a complete GGUF file.") from None
        self.gguf_path = gguf_path
        self.threads = threads
        # Shared with adapter siblings (copy.copy): they compute on the same cores.
        self._compute = _ComputeGate(max(1, cores // threads))
        self.repetition_penalty = repetition_penalty
        self.context_length = context_tokens
        self.batch_tokens = batch_tokens
        self._model = self._llama._model
        self._vocab_size = self._llama.n_vocab()
        metadata = read_gguf_metadata(gguf_path)
        self._template = _compile_template(metadata.get("tokenizer.chat_template"), gguf_path)
        tokens = metadata.get("tokenizer.ggml.tokens") or []
        self._bos = tokens[self._model.token_bos()] if 0 <= self._model.token_bos() < len(tokens) else ""
        self._eos = tokens[self._model.token_eos()] if 0 <= self._model.token_eos() < len(tokens) else ""
        self.parameters = int(self._model.n_params())
        self.name = name or f"llamacpp:{display_name(gguf_path)}"
        is_small = self.parameters < SMALL_MODEL_PARAMETERS if small is None else small
        # Guided turns: measured on Qwen2.5-Coder-1.5B, a free-form turn ends after its <think> block
        # (every turn needed a recovery), so local models are guided whatever their size.
        self.traits = ModelTraits(small=is_small, guided_turns=True, context_tokens=context_tokens,
                                  executor_turns=8 if is_small else 4)
        self.adapter_path: Path | None = None
        self._set_slots([_Slot(self._llama._ctx, self._llama._batch)] + [self._new_slot() for _ in range(slots - 1)], seed)

    def _new_slot(self) -> _Slot:
        from llama_cpp import _internals as internals

        context = internals.LlamaContext(model=self._model, params=self._llama.context_params, verbose=False)
        batch = internals.LlamaBatch(n_tokens=self.batch_tokens, embd=0, n_seq_max=1, verbose=False)
        return _Slot(context, batch)

    def _set_slots(self, slot_list: list[_Slot], seed: int) -> None:
        self._slots = slot_list  # kept alive with the model
        self._pool = _SlotPool(slot_list)
        self._stats_lock = threading.Lock()
        self.prompt_tokens_total = 0
        self.prompt_tokens_cached = 0
        self._rng = np.random.default_rng(seed)

    def with_adapter(self, adapter_gguf: Path, *, name: str, slots: int = 1, scale: float = 1.0) -> LlamaCppChatModel:
        """The same loaded weights with a LoRA adapter (a GGUF adapter file) applied, in slots of its
        own, so the other roles' calls keep answering with the base weights."""
        import copy
        import ctypes

        lib = self._llama_cpp
        adapter = lib.llama_adapter_lora_init(self._model.model, str(adapter_gguf).encode("utf-8"))
        if not adapter:
            raise LLMError(f"llama.cpp could not load the adapter {adapter_gguf} for {self.name}; it must be a "
                           "GGUF LoRA adapter converted for this very model.")
        sibling = copy.copy(self)
        slot_list = [self._new_slot() for _ in range(max(1, slots))]
        for slot in slot_list:
            adapters = (lib.llama_adapter_lora_p_ctypes * 1)(adapter)
            if lib.llama_set_adapters_lora(slot.context.ctx, adapters, 1, (ctypes.c_float * 1)(scale)):
                raise LLMError(f"llama.cpp refused to apply the adapter {adapter_gguf} to {self.name}.")
        sibling._set_slots(slot_list, seed=0)
        # Freed by release(), or once nothing refers to the sibling (an app process's superseded
        # Planner, after the last run using it ends); not only when the model itself is freed.
        sibling._free_native = weakref.finalize(sibling, _free_sibling, lib, slot_list, adapter)
        sibling.adapter_path = Path(adapter_gguf)
        sibling.name = name
        return sibling

    def release(self) -> None:
        """Free an adapter sibling's contexts (their KV caches and compute buffers) and its adapter,
        once no call is decoding in them. llama-cpp-python's loaded model keeps every context it made
        alive until the model itself is freed, so a sibling that is merely dropped keeps its memory
        for the life of the process: a test-time learner making a sibling for every Planner version
        grew by about a gigabyte a version. Calls after this raise LLMError; the base model is untouched."""
        free_native = getattr(self, "_free_native", None)
        if free_native is None or not free_native.alive:
            raise LLMError(f"{self.name} is not an adapter sibling (or was released already): only with_adapter()'s "
                           "models are released; the base model is freed with the process.")
        self._pool.close_all(f"{self.name} was released (a newer Planner version replaced it); "
                             "ask the registry for the current version's model.")
        free_native()
        self._slots = []

    # ---- ChatModel ----------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        return len(self._tokenize(text, special=False))

    def stream(
        self,
        messages: list[dict],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        prefill: str = "",
        temperature: float = 0.0,
        logprobs: int | None = None,
    ) -> Iterator[str | Completion]:
        prompt_ids, budget, stops = self._prepare(messages, max_new_tokens, stop, prefill, temperature)

        def produce(emit: Callable[[str], None], cancelled: threading.Event) -> Completion:
            return self._decode_turn(prompt_ids, budget, stops, temperature, logprobs, emit=emit, cancelled=cancelled)

        return stream_in_thread(produce, "llamacpp-decode")

    def sample_ids(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
                   prefill: str = "", temperature: float = 1.0) -> tuple[Completion, list[int], list[int]]:
        """One completion with the prompt's token ids and every token sampled (the turn-ending token
        and a stop string's tokens included): what a trainer needs to score the same sequence."""
        prompt_ids, budget, stops = self._prepare(messages, max_new_tokens, stop, prefill, temperature)
        sampled: list[int] = []
        completion = self._decode_turn(prompt_ids, budget, stops, temperature, 0, emit=lambda text: None,
                                       cancelled=threading.Event(), sampled=sampled)
        return completion, prompt_ids, sampled

    def _decode_turn(self, prompt_ids: list[int], budget: int, stops: list[str], temperature: float,
                     logprobs: int | None, *, emit: Callable[[str], None], cancelled: threading.Event,
                     sampled: list[int] | None = None) -> Completion:
        """One turn decoded in a slot until its end, a stop string, cancellation or the budget;
        `sampled` collects every token id drawn."""
        started = time.perf_counter()
        slot = self._pool.acquire(prompt_ids)
        try:
            tokens = self._next_tokens(slot, prompt_ids, budget, temperature, logprobs)
            if sampled is not None:
                tokens = _recorded(tokens, sampled)
            decoded = collect_text(tokens, decode=self._detokenize, end_ids=self._is_turn_end, stops=stops,
                                   emit=emit, cancelled=cancelled)
        finally:
            self._pool.release(slot)
        return Completion(
            text=decoded.text, prompt_tokens=len(prompt_ids), completion_tokens=decoded.produced,
            seconds=time.perf_counter() - started, finish_reason=decoded.finish_reason,
            logprobs=decoded.details if logprobs is not None else None, cached_tokens=slot.reused,
        )

    def score_options(
        self, messages: list[dict], options: Sequence[str], *, prefill: str = "", top_logprobs: int = 0
    ) -> list[list[TokenLogprob]]:
        """Log-probability of each token of each option as the continuation of the assistant turn.
        The prompt is read once (or found in a slot's cache); each option then costs one batch."""
        options = check_options(options)
        prompt_ids = self.prompt_ids(messages, prefill)
        option_ids = [self._continuation_ids(messages, prefill, prompt_ids, option) for option in options]
        longest = max(len(ids) for ids in option_ids)
        if len(prompt_ids) + longest > self.context_length:
            raise LLMError(
                f"The prompt ({len(prompt_ids)} tokens) plus the longest option ({longest}) exceeds the "
                f"model's context of {self.context_length}; shorten the conversation."
            )
        slot = self._pool.acquire(prompt_ids)
        try:
            first = _log_softmax(self._feed(slot, prompt_ids))
            scored = []
            for ids in option_ids:
                dists = [first]
                if len(ids) > 1:
                    rows = self._feed(slot, prompt_ids + ids[:-1], all_new=True, is_prompt=False)
                    dists += [_log_softmax(row) for row in rows]
                scored.append([self._token_logprob(d, t, top_logprobs) for d, t in zip(dists, ids)])
        finally:
            self._pool.release(slot)
        return scored

    # ---- prompts ------------------------------------------------------------------------------

    def prompt_ids(self, messages: list[dict], prefill: str = "") -> list[int]:
        """The chat template's markup as special tokens, every message's text (and the prefill) as plain text."""
        check_messages(messages)
        contents = [m["content"] for m in messages]
        plain = [{"role": m["role"], "content": _SENTINEL.format(i)} for i, m in enumerate(messages)]
        rendered = self._template.render(messages=plain, add_generation_prompt=True,
                                         bos_token=self._bos, eos_token=self._eos)
        ids: list[int] = []
        for index, content in enumerate(contents):
            marker = _SENTINEL.format(index)
            head, found, rendered = rendered.partition(marker)
            if not found:
                raise LLMError(f"The chat template of {self.gguf_path.name} dropped message {index}; use another model file.")
            ids += self._tokenize(head, special=True) + self._tokenize(content, special=False)
        return ids + self._tokenize(rendered, special=True) + self._tokenize(prefill, special=False)

    def _continuation_ids(self, messages: list[dict], prefill: str, prompt_ids: list[int], option: str) -> list[int]:
        """The tokens of `option` after the prompt as the tokenizer splits prefill+option; if a merge
        crosses the boundary, the option tokenised on its own."""
        joined = self.prompt_ids(messages, prefill + option)
        if joined[: len(prompt_ids)] == prompt_ids and len(joined) > len(prompt_ids):
            return joined[len(prompt_ids):]
        return self._tokenize(option, special=False)

    def _tokenize(self, text: str, *, special: bool) -> list[int]:
        if not text:
            return []
        return self._model.tokenize(text.encode("utf-8"), False, special)

    def _detokenize(self, ids: list[int]) -> str:
        return self._model.detokenize(ids, special=False).decode("utf-8", errors="replace")

    @lru_cache(maxsize=None)
    def _is_turn_end(self, token_id: int) -> bool:
        return bool(self._llama_cpp.llama_vocab_is_eog(self._model.vocab, token_id))

    # ---- decoding -----------------------------------------------------------------------------

    def _feed(self, slot: _Slot, ids: list[int], *, all_new: bool = False, is_prompt: bool = True) -> np.ndarray:
        """Bring the slot's cache to `ids`, re-reading only what follows the cached prefix. Returns the
        logits after the last token, or (all_new) one row per token read here. `is_prompt`: counted in
        cache_stats (a generated token fed back is not a prompt)."""
        keep = _common_prefix(slot.tokens, ids)
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

    def _logits(self, slot: _Slot, index: int) -> np.ndarray:
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
        self, slot: _Slot, prompt_ids: list[int], budget: int, temperature: float, top_k: int | None
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
            detail = self._token_logprob(_log_softmax(logits), token_id, top_k) if top_k is not None else None
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


def _compile_template(source: object, gguf_path: Path):
    if not isinstance(source, str) or not source.strip():
        raise LLMError(f"{gguf_path.name} carries no chat template; use a chat (instruct) model's GGUF.")
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise LLMError(f"The chat template of {gguf_path.name} refused the conversation: {message}")

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals["raise_exception"] = raise_exception
    return environment.from_string(source)


_loaded: dict[tuple, LlamaCppChatModel] = {}
_loaded_lock = threading.Lock()


def _recorded(tokens: Iterator[tuple[int, TokenLogprob | None]], sampled: list[int]):
    for token_id, detail in tokens:
        sampled.append(token_id)
        yield token_id, detail


def get_llamacpp_model(gguf_path: Path, **settings) -> LlamaCppChatModel:
    """The process-wide model for `gguf_path` and these settings: loaded once, shared by every role."""
    key = (Path(gguf_path).resolve(), tuple(sorted(settings.items())))
    with _loaded_lock:
        if key not in _loaded:
            _loaded[key] = LlamaCppChatModel(key[0], **settings)
        return _loaded[key]
