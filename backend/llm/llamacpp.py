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

This module loads the model, makes its adapter siblings and answers the ChatModel calls; the slots
and the compute gate are in backend.llm.llamacpp_slots, the chat template and tokenizer in
backend.llm.llamacpp_prompts, and decoding in a slot in backend.llm.llamacpp_decoding.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from backend.llm.base import (
    Completion,
    LLMError,
    ModelTraits,
    TokenLogprob,
    check_options,
)
from backend.llm.decoding import collect_text, stream_in_thread
from backend.llm.gguf_import import display_name
from backend.llm.gguf_metadata import read_gguf_metadata
from backend.llm.llamacpp_decoding import SlotDecoding, log_softmax, recorded
from backend.llm.llamacpp_prompts import TemplatePrompts, compile_template
from backend.llm.llamacpp_slots import ComputeGate, Slot, SlotPool
from backend.llm.local import InProcessChatModel

SMALL_MODEL_PARAMETERS = 1_000_000_000  # below this a model is "small" unless the role says otherwise


def _free_sibling(lib, slots: list[Slot], adapter) -> None:
    """An adapter sibling's native memory: its contexts and batches, then its adapter (weakref.finalize
    runs this at most once; it must not refer to the sibling)."""
    for slot in slots:
        slot.context.close()
        slot.batch.close()
    lib.llama_adapter_lora_free(adapter)


class LlamaCppChatModel(TemplatePrompts, SlotDecoding, InProcessChatModel):
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
        self._compute = ComputeGate(max(1, cores // threads))
        self.repetition_penalty = repetition_penalty
        self.context_length = context_tokens
        self.batch_tokens = batch_tokens
        self._model = self._llama._model
        self._vocab_size = self._llama.n_vocab()
        metadata = read_gguf_metadata(gguf_path)
        self._template = compile_template(metadata.get("tokenizer.chat_template"), gguf_path)
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
        self._set_slots([Slot(self._llama._ctx, self._llama._batch)] + [self._new_slot() for _ in range(slots - 1)], seed)

    def _new_slot(self) -> Slot:
        from llama_cpp import _internals as internals

        context = internals.LlamaContext(model=self._model, params=self._llama.context_params, verbose=False)
        batch = internals.LlamaBatch(n_tokens=self.batch_tokens, embd=0, n_seq_max=1, verbose=False)
        return Slot(context, batch)

    def _set_slots(self, slot_list: list[Slot], seed: int) -> None:
        self._slots = slot_list  # kept alive with the model
        self._pool = SlotPool(slot_list)
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
                tokens = recorded(tokens, sampled)
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
            first = log_softmax(self._feed(slot, prompt_ids))
            scored = []
            for ids in option_ids:
                dists = [first]
                if len(ids) > 1:
                    rows = self._feed(slot, prompt_ids + ids[:-1], all_new=True, is_prompt=False)
                    dists += [log_softmax(row) for row in rows]
                scored.append([self._token_logprob(d, t, top_logprobs) for d, t in zip(dists, ids)])
        finally:
            self._pool.release(slot)
        return scored


_loaded: dict[tuple, LlamaCppChatModel] = {}
_loaded_lock = threading.Lock()


def get_llamacpp_model(gguf_path: Path, **settings) -> LlamaCppChatModel:
    """The process-wide model for `gguf_path` and these settings: loaded once, shared by every role."""
    key = (Path(gguf_path).resolve(), tuple(sorted(settings.items())))
    with _loaded_lock:
        if key not in _loaded:
            _loaded[key] = LlamaCppChatModel(key[0], **settings)
        return _loaded[key]
