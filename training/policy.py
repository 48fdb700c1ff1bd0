"""The model being trained, speaking the app's ChatModel contract so the real roles drive it.

`PolicyChatModel` is the embedded model with two differences while an episode is recorded: every
`generate` samples at the training temperature (the roles ask for greedy text at inference) and
every constrained `choose` samples an option from the options' probabilities; each decision is
kept as a `TurnSample` (prompt token ids, sampled token ids) for the policy-gradient update.
Because the Planner and ExecutorSession run unchanged, training sees exactly the prompts,
context trimming and recoveries of the app.

Memory: the base weights may load in bfloat16 (half of float32; LoRA adapters stay float32), and
training recomputes each layer's activations in the backward pass instead of keeping every layer's
(gradient checkpointing): a Planner prompt of a few thousand tokens otherwise holds gigabytes of
activations on a 1.5B model (benchmarks/learner_memory_bench.py measures the peak); and the
process returns what a step frees (training.freed_memory).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from backend.llm.base import Choice, Completion, check_options
from backend.llm.embedded import EmbeddedChatModel
from training.freed_memory import map_large_blocks

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class TurnSample:
    prompt_ids: list[int]
    completion_ids: list[int]  # what the policy sampled (including the turn-ending token)


@dataclass(frozen=True)
class LoraSettings:
    r: int = 8
    alpha: int = 16
    dropout: float = 0.0


class PolicyChatModel(EmbeddedChatModel):
    def __init__(self, model_dir: Path, *, temperature: float = 1.0, lora: LoraSettings | None = None,
                 adapter_dir: Path | None = None, dtype: torch.dtype = torch.float32, seed: int | None = None) -> None:
        """`adapter_dir` continues training a saved LoRA adapter (its own r and alpha) instead of a fresh one;
        `dtype`: the base weights' (peft keeps the adapters in float32 over bfloat16 weights); `seed`: sample
        from a generator of its own, so the same calls sample the same tokens whatever else drew from torch's."""
        map_large_blocks()
        # No repetition penalty: sampling must follow the policy's own distribution.
        super().__init__(model_dir, repetition_penalty=1.0, name=f"policy:{Path(model_dir).name}", dtype=dtype)
        self.temperature = temperature
        if seed is not None:
            self.sampling_generator = torch.Generator().manual_seed(seed)
        self.lora = lora if adapter_dir is None else (lora or LoraSettings())
        if adapter_dir is not None:
            from peft import PeftModel

            self.model = PeftModel.from_pretrained(self.model, str(adapter_dir), is_trainable=True)
        elif lora is not None:
            from peft import LoraConfig, get_peft_model

            config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                target_modules=LORA_TARGETS, task_type="CAUSAL_LM")
            self.model = get_peft_model(self.model, config)
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.model.eval()
        self._recording: list[TurnSample] | None = None
        self._sampled: list[int] = []

    # -- episode recording ----------------------------------------------------------------------
    def begin_episode(self) -> None:
        self._recording = []

    def end_episode(self) -> list[TurnSample]:
        samples, self._recording = self._recording or [], None
        return samples

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    # -- ChatModel overrides ----------------------------------------------------------------------
    def stream(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
               prefill: str = "", temperature: float = 0.0, logprobs: int | None = None) -> Iterator[str | Completion]:
        if self._recording is None:
            return super().stream(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill,
                                  temperature=temperature, logprobs=logprobs)
        inner = super().stream(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill,
                               temperature=self.temperature, logprobs=logprobs)
        return self._record(self.prompt_ids(messages, prefill), inner)

    def _record(self, prompt_ids: list[int], inner: Iterator[str | Completion]) -> Iterator[str | Completion]:
        self._sampled = []
        for item in inner:
            if isinstance(item, Completion) and self._recording is not None and self._sampled:
                self._recording.append(TurnSample(prompt_ids, list(self._sampled)))
            yield item

    def _next_token_ids(self, prompt_ids, budget, temperature, top_k):
        for token_id, detail in super()._next_token_ids(prompt_ids, budget, temperature, top_k):
            self._sampled.append(token_id)
            yield token_id, detail

    def choose(self, messages: list[dict], options: Sequence[str], *, prefill: str = "") -> Choice:
        if self._recording is None:
            return super().choose(messages, options, prefill=prefill)
        options = check_options(options)
        scored = self.score_options(messages, options, prefill=prefill)
        sums = torch.tensor([sum(t.logprob for t in tokens) for tokens in scored])
        index = int(torch.multinomial(torch.softmax(sums / self.temperature, dim=0), 1, generator=self.sampling_generator))
        prompt_text = self.prompt_text(messages, prefill)
        prompt_ids = self.encode(prompt_text)
        option_ids = self._continuation_ids(prompt_text, prompt_ids, options[index])
        self._recording.append(TurnSample(prompt_ids, option_ids))
        return Choice(label=options[index], logprobs=dict(zip(options, sums.tolist())), method="sampled-logprob")

    # -- saving ---------------------------------------------------------------------------------
    def save(self, target_dir: Path, *, display_name: str) -> Path:
        """A merged transformers folder the app loads by `model_dir`; with LoRA also `adapter/`."""
        import copy

        from backend.llm.gguf_import import write_manifest

        target_dir = Path(target_dir)
        target_dir.mkdir(parents=True, exist_ok=True)
        model = self.model
        if self.lora is not None:
            model.save_pretrained(target_dir / "adapter")  # for vLLM's --enable-lora
            model = copy.deepcopy(model).merge_and_unload()
        model.save_pretrained(target_dir)
        self.tokenizer.save_pretrained(target_dir)
        write_manifest(target_dir, display_name=display_name, trained_from=str(self.model_dir))
        return target_dir

    def save_adapter(self, target_dir: Path) -> Path:
        """Only the LoRA adapter (a few MB): what test-time learning keeps per Planner version."""
        if self.lora is None:
            raise ValueError("save_adapter needs a LoRA policy; full fine-tuning saves with save().")
        self.model.save_pretrained(Path(target_dir))
        return Path(target_dir)

    def trainable_state(self) -> dict[str, torch.Tensor]:
        return {name: p.detach().clone() for name, p in self.model.named_parameters() if p.requires_grad}

    def restore_trainable_state(self, state: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for name, p in self.model.named_parameters():
                if name in state:
                    p.copy_(state[name])
