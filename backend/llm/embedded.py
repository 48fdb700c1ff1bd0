"""The embedded chat model: a transformers causal LM run on CPU inside this process.

One loaded model per folder is shared by every role (`get_embedded_model`); a re-entrant lock
around each call makes concurrent callers queue instead of interleaving on the same weights.
This is the small, fast option and the test model; the capable default runs on llama.cpp
(backend.llm.llamacpp).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import torch

from backend.llm.base import (
    Completion,
    LLMError,
    ModelTraits,
    TokenLogprob,
    check_messages,
    check_options,
)
from backend.llm.gguf_import import default_gguf_path, prepare_embedded_model, read_manifest
from backend.llm.decoding import collect_text, stream_in_thread
from backend.llm.local import InProcessChatModel

__all__ = [
    "EMBEDDED_TRAITS",
    "EmbeddedChatModel",
    "default_gguf_path",
    "get_embedded_model",
    "prepare_embedded_model",
]


# The transformers path runs SmolLM2-sized models: the loop guides them. `context_tokens` is each
# model's own; the rest is what every embedded model declares (the GRPO trainer resolves "auto" with it).
EMBEDDED_TRAITS = ModelTraits(small=True, guided_turns=True, executor_turns=8)


class EmbeddedChatModel(InProcessChatModel):
    supports_images = False  # callers put an image caption in the text; the "image" key is ignored
    supports_logprobs = True  # generate(..., logprobs=k) and score_options() give per-token details

    def __init__(
        self,
        model_dir: Path,
        *,
        name: str | None = None,
        threads: int | None = None,
        repetition_penalty: float = 1.1,
        adapter_dir: Path | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model_dir = Path(model_dir)
        if not (model_dir / "config.json").is_file():
            raise LLMError(
                f"{model_dir} is not a model folder (no config.json); prepare it with "
                "prepare_embedded_model(cache_dir) or point the setting at a transformers model folder."
            )
        if repetition_penalty <= 0:
            raise LLMError(f"repetition_penalty must be positive (1.0 = off); got {repetition_penalty}.")
        if threads is not None:
            torch.set_num_threads(threads)
        self.model_dir = model_dir
        self.repetition_penalty = repetition_penalty
        self.sampling_generator: torch.Generator | None = None  # None: torch's global generator
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype)
        self.adapter_dir = Path(adapter_dir) if adapter_dir else None
        if self.adapter_dir is not None:
            self.model = merge_adapter(self.model, self.adapter_dir)
        self.model.eval()
        manifest = read_manifest(model_dir) or {}
        adapter_label = f"+{self.adapter_dir.parent.name}" if self.adapter_dir is not None else ""
        self.name = name or f"embedded:{manifest.get('display_name', model_dir.name)}{adapter_label}"
        self.context_length = int(getattr(self.model.config, "max_position_embeddings", 2048))
        self.traits = replace(EMBEDDED_TRAITS, context_tokens=self.context_length)
        self._end_ids = self._turn_ending_ids()
        self._lock = threading.RLock()
        # Fast tokenizers raise "Already borrowed" when two threads use one at once.
        self._tokenizer_lock = threading.Lock()

    # ---- public API -------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

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
        return self._stream(prompt_ids, budget, stops, temperature, logprobs)


    def score_options(
        self, messages: list[dict], options: Sequence[str], *, prefill: str = "", top_logprobs: int = 0
    ) -> list[list[TokenLogprob]]:
        """Log-probability of each token of each option as the continuation of the assistant turn.

        The prompt runs once; its cache is then shared by all options in one batched forward pass.
        """
        options = check_options(options)
        prompt_text = self.prompt_text(messages, prefill)
        prompt_ids = self.encode(prompt_text)
        option_ids = [self._continuation_ids(prompt_text, prompt_ids, option) for option in options]
        longest = max(len(ids) for ids in option_ids)
        if len(prompt_ids) + longest > self.context_length:
            raise LLMError(
                f"The prompt ({len(prompt_ids)} tokens) plus the longest option ({longest}) exceeds the "
                f"model's context of {self.context_length}; shorten the conversation."
            )
        with self._lock, torch.inference_mode():
            out = self.model(input_ids=torch.tensor([prompt_ids]), use_cache=True, logits_to_keep=1)
            first = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
            # position i of rows[k] predicts option k's token i+1
            rows = None
            if longest > 1:
                cache = out.past_key_values
                cache.batch_repeat_interleave(len(options))
                pad_id = self.tokenizer.pad_token_id or 0
                # Right padding: causal attention keeps pad positions out of every real position.
                batch = torch.tensor([ids + [pad_id] * (longest - len(ids)) for ids in option_ids])
                rows = torch.log_softmax(
                    self.model(input_ids=batch, past_key_values=cache, use_cache=True).logits.float(), dim=-1
                )
        scored = []
        for k, ids in enumerate(option_ids):
            dists = [first] + ([rows[k, i] for i in range(len(ids) - 1)] if rows is not None else [])
            scored.append([self._token_logprob(dist, token_id, top_logprobs) for dist, token_id in zip(dists, ids)])
        return scored

    # ---- prompt building ----------------------------------------------------------------------

    def prompt_text(self, messages: list[dict], prefill: str = "") -> str:
        check_messages(messages)
        plain = [{"role": m["role"], "content": m["content"]} for m in messages]  # drops "image"
        with self._tokenizer_lock:
            templated = self.tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=True)
        return templated + prefill

    def prompt_ids(self, messages: list[dict], prefill: str = "") -> list[int]:
        return self.encode(self.prompt_text(messages, prefill))

    def encode(self, text: str) -> list[int]:
        with self._tokenizer_lock:
            return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def _decode(self, ids: list[int]) -> str:
        with self._tokenizer_lock:
            return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def _continuation_ids(self, prompt_text: str, prompt_ids: list[int], option: str) -> list[int]:
        """The tokens of `option` right after the prompt, as the tokenizer would split prompt+option.

        If a BPE merge crosses the boundary (the prompt's own tokens change), the prompt stays as fed
        to the model and the option is tokenised on its own.
        """
        joined = self.encode(prompt_text + option)
        if joined[: len(prompt_ids)] == prompt_ids and len(joined) > len(prompt_ids):
            return joined[len(prompt_ids):]
        return self.encode(option)

    def _turn_ending_ids(self) -> set[int]:
        """Tokens that end the assistant turn: EOS and the chat-control tokens (never shown as text)."""
        ids = set(self.tokenizer.all_special_ids)
        configured = self.model.generation_config.eos_token_id
        if configured is not None:
            ids.update(configured if isinstance(configured, list) else [configured])
        return ids

    # ---- decoding -----------------------------------------------------------------------------

    def _token_logprob(self, dist: torch.Tensor, token_id: int, top_k: int) -> TokenLogprob:
        top: list[tuple[str, float]] = []
        if top_k:
            values, indices = torch.topk(dist, top_k)
            top = [(self._decode([int(i)]), float(v)) for v, i in zip(values, indices)]
        return TokenLogprob(token=self._decode([token_id]), logprob=float(dist[token_id]), top=top)

    def _penalise_repeats(self, logits: torch.Tensor, generated: list[int]) -> torch.Tensor:
        # Only the model's own output is penalised: copying names from the prompt must stay cheap.
        if self.repetition_penalty == 1.0 or not generated:
            return logits
        index = torch.tensor(sorted(set(generated)))
        chosen = logits[index]
        logits = logits.clone()
        logits[index] = torch.where(chosen > 0, chosen / self.repetition_penalty, chosen * self.repetition_penalty)
        return logits

    def _next_token_ids(
        self, prompt_ids: list[int], budget: int, temperature: float, top_k: int | None
    ) -> Iterator[tuple[int, TokenLogprob | None]]:
        generated: list[int] = []
        input_ids = torch.tensor([prompt_ids])
        cache = None
        for _ in range(budget):
            with torch.inference_mode():
                out = self.model(input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            cache = out.past_key_values
            logits = out.logits[0, -1].float()
            scores = self._penalise_repeats(logits, generated)
            if temperature > 0:
                probabilities = torch.softmax(scores / temperature, dim=-1)
                token_id = int(torch.multinomial(probabilities, 1, generator=self.sampling_generator))
            else:
                token_id = int(torch.argmax(scores))
            detail = None
            if top_k is not None:
                detail = self._token_logprob(torch.log_softmax(logits, dim=-1), token_id, top_k)
            yield token_id, detail
            generated.append(token_id)
            input_ids = torch.tensor([[token_id]])

    def _stream(
        self, prompt_ids: list[int], budget: int, stops: list[str], temperature: float, top_k: int | None
    ) -> Iterator[str | Completion]:
        """Text pieces as they are decoded, then the Completion (decoded on a thread of its own:
        backend.llm.decoding says why)."""

        def produce(emit: Callable[[str], None], cancelled: threading.Event) -> Completion:
            started = time.perf_counter()
            with self._lock:
                decoded = collect_text(
                    self._next_token_ids(prompt_ids, budget, temperature, top_k),
                    decode=self._decode, end_ids=self._end_ids, stops=stops, emit=emit, cancelled=cancelled,
                )
            return Completion(
                text=decoded.text,
                prompt_tokens=len(prompt_ids),
                completion_tokens=decoded.produced,
                seconds=time.perf_counter() - started,
                finish_reason=decoded.finish_reason,
                logprobs=decoded.details if top_k is not None else None,
            )

        return stream_in_thread(produce, "embedded-decode")


def merge_adapter(model, adapter_dir: Path):
    """The base model with a LoRA adapter folder (peft format) merged into its weights."""
    if not (adapter_dir / "adapter_config.json").is_file():
        raise LLMError(
            f"{adapter_dir} is not a LoRA adapter folder (no adapter_config.json); point adapter_dir at a "
            "test-time-learning version's adapter/ folder or leave it empty."
        )
    from peft import PeftModel

    return PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()


_loaded: dict[tuple[Path, Path | None], EmbeddedChatModel] = {}
_loaded_lock = threading.Lock()


def get_embedded_model(model_dir: Path, adapter_dir: Path | None = None) -> EmbeddedChatModel:
    """The process-wide model for `model_dir` (+ adapter): loaded once, then shared by every role."""
    key = (Path(model_dir).resolve(), Path(adapter_dir).resolve() if adapter_dir else None)
    with _loaded_lock:
        if key not in _loaded:
            _loaded[key] = EmbeddedChatModel(key[0], adapter_dir=key[1])
        return _loaded[key]
