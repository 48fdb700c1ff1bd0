"""The reader's supervised fine-tuning: a LoRA on the Executor's model, trained on reading examples
(training.reader_data) with transformers' Trainer, loss on the reader's own tokens only.

Read top to bottom: load the base weights (the app's GGUF, dequantised once), tokenize each example
as the app's chat template renders it (the prompt, then the assistant turn: the app's prefills
masked out, the reader's text and its turn's end trained), train with checkpoints that a killed run
resumes from, score the validation examples at each checkpoint, then save the adapter, its llama.cpp
conversion and a manifest (training.reader_adapter).

Progress: the Trainer's bar (time left included) and `<output_dir>/log.jsonl`, one line per
optimiser step (loss, learning rate, seconds, tokens, peak memory) and one per validation.
"""

from __future__ import annotations

import json
import math
import random
import resource
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from backend.llm.tiny import build_tiny_random_model
from training.reader_data import ReaderDataError, file_sha256, load_rows
from training.sft_config import SFTSettings

IGNORE = -100
CHECKPOINTS = "checkpoints"
LOG_FILE = "log.jsonl"


@dataclass
class TokenizedExample:
    input_ids: list[int]
    labels: list[int]  # IGNORE where the token is prompt or prefill

    @property
    def trained_tokens(self) -> int:
        return sum(label != IGNORE for label in self.labels)


def tokenize_example(tokenizer, row: dict) -> TokenizedExample:
    """The prompt as the chat template renders it for generation, then the assistant's turn; a token
    is trained when it begins inside a trained segment (offsets of one tokenization of the whole text,
    so the split matches what the app's model reads and writes)."""
    plain = [{"role": m["role"], "content": m["content"]} for m in row["messages"]]
    text = tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=True)
    trained: list[tuple[int, int]] = []
    for segment in row["segments"]:
        start = len(text)
        text += segment["text"]
        if segment.get("end"):
            text += tokenizer.eos_token
        if segment.get("train"):
            trained.append((start, len(text)))
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    labels = []
    for token_id, (begin, _end) in zip(encoded["input_ids"], encoded["offset_mapping"]):
        inside = any(start <= begin < stop for start, stop in trained)
        labels.append(token_id if inside else IGNORE)
    return TokenizedExample(list(encoded["input_ids"]), labels)


class ReadingDataset(torch.utils.data.Dataset):
    def __init__(self, examples: list[TokenizedExample]) -> None:
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> dict:
        example = self.examples[index]
        return {"input_ids": example.input_ids, "labels": example.labels}


def collate(batch: list[dict]) -> dict:
    """Pads on the right (labels with IGNORE)."""
    width = max(len(item["input_ids"]) for item in batch)
    ids = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, item in enumerate(batch):
        n = len(item["input_ids"])
        ids[i, :n] = torch.tensor(item["input_ids"])
        labels[i, :n] = torch.tensor(item["labels"])
        mask[i, :n] = 1
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}


def base_model_dir(settings: SFTSettings) -> tuple[Path, Path | None]:
    """(transformers folder, the GGUF it came from or None) of `settings.model`."""
    cache = settings.cache_path
    if settings.model == "tiny-random":
        target = cache / "models" / "tiny-random"
        if not (target / "config.json").is_file():
            build_tiny_random_model(target)
        return target, None
    from backend.llm.gguf_import import default_gguf_path, prepare_embedded_model

    if settings.model == "smollm2":
        gguf = default_gguf_path()
    elif settings.model == "qwen":
        from backend.config import load_config
        from backend.llm.registry import gguf_file

        config = load_config()
        gguf = gguf_file(config, config.role("executor"), progress=True)
    elif settings.model.endswith(".gguf"):
        gguf = settings.resolve(settings.model)
        if not gguf.is_file():
            raise ReaderDataError(f"model {gguf} does not exist; give the Executor's GGUF file, qwen, smollm2 or tiny-random.")
    else:
        folder = settings.resolve(settings.model)
        if not (folder / "config.json").is_file():
            raise ReaderDataError(f"model folder {folder} has no config.json; use qwen, smollm2, tiny-random or a "
                                  "transformers folder.")
        return folder, None
    return prepare_embedded_model(cache / "models", gguf_path=gguf, progress=True, dtype=settings.weights_dtype), gguf


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024


def append_log(output: Path, line: dict) -> None:
    with (output / LOG_FILE).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")


@torch.no_grad()
def validation_scores(model, examples: list[TokenizedExample]) -> dict:
    """Teacher-forced: the mean loss on the trained tokens, the share of trained tokens the model
    predicts first, and the share of examples whose answer (the last run of trained tokens) it
    predicts whole."""
    was_training = model.training
    model.eval()
    losses, right, total, whole = [], 0, 0, 0
    for example in examples:
        targets = torch.tensor(example.labels[1:])
        positions = (targets != IGNORE).nonzero().flatten()
        logits = model(input_ids=torch.tensor([example.input_ids]), logits_to_keep=positions).logits[0].float()
        wanted = targets[positions]
        losses.append(torch.nn.functional.cross_entropy(logits, wanted).item())
        hits = (logits.argmax(-1) == wanted).tolist()
        right += sum(hits)
        total += len(hits)
        answer_start = _last_gap(positions.tolist())
        whole += int(all(hit for hit, p in zip(hits, positions.tolist()) if p > answer_start))
    if was_training:
        model.train()
    n = max(1, len(examples))
    return {"validation_loss": sum(losses) / n, "validation_token_accuracy": right / max(1, total),
            "validation_answer_exact": whole / n, "validation_examples": len(examples)}


def _last_gap(positions: list[int]) -> int:
    """The position before the last run of consecutive trained positions (the answer and its turn end)."""
    for i in range(len(positions) - 1, 0, -1):
        if positions[i] != positions[i - 1] + 1:
            return positions[i - 1]
    return -1


def prepared_examples(settings: SFTSettings, tokenizer) -> tuple[list[TokenizedExample], list[TokenizedExample], dict]:
    rows = load_rows(settings.data_path)
    train_rows = [r for r in rows if r["split"] == "train"]
    validation_rows = [r for r in rows if r["split"] == "validation"]
    random.Random(settings.seed).shuffle(train_rows)
    if settings.max_examples:
        train_rows = train_rows[: settings.max_examples]
    train = [tokenize_example(tokenizer, r) for r in train_rows]
    kept = [e for e in train if len(e.input_ids) <= settings.max_tokens and e.trained_tokens]
    validation = [tokenize_example(tokenizer, r) for r in validation_rows[: settings.validation_examples]]
    by_source: dict[str, int] = {}
    for row in train_rows:
        by_source[row.get("source", "?")] = by_source.get(row.get("source", "?"), 0) + 1
    stats = {"examples": len(kept), "too_long": len(train) - len(kept), "by_source": by_source,
             "prompt_tokens": sum(len(e.input_ids) for e in kept), "trained_tokens": sum(e.trained_tokens for e in kept),
             "validation": len(validation), "data_sha256": file_sha256(settings.data_path)}
    if not kept:
        raise ReaderDataError(f"{settings.data_path} has no training example of at most {settings.max_tokens} tokens; "
                              "build examples with `python -m training reader-data` or raise max_tokens.")
    return kept, validation, stats


def trained_token_loss(model, inputs: dict, num_items: int | None = None) -> torch.Tensor:
    """Cross-entropy on the trained tokens, the vocabulary's logits computed at those positions only
    (over a 151,936-word vocabulary they would otherwise cost a tenth of the step), summed and divided
    by the trained tokens of the whole optimiser step (`num_items`), so each token counts alike."""
    targets = inputs["labels"][:, 1:]
    rows, positions = (targets != IGNORE).nonzero(as_tuple=True)
    if len(inputs["input_ids"]) != 1:
        raise ValueError("the reader's trainer takes one example at a time (per_device_train_batch_size = 1)")
    logits = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                   logits_to_keep=positions).logits[0]
    loss = torch.nn.functional.cross_entropy(logits.float(), targets[rows, positions], reduction="sum")
    return loss / (int(num_items) if num_items else len(positions))


def validate_reader(settings: SFTSettings, adapter: Path | None = None) -> dict:
    """The trainer's validation scores (same examples, same measures) of the base model alone, or of the
    base with `adapter` (a run's adapter/ or one of its checkpoints/checkpoint-N), so a run's
    checkpoints read against where it started."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if adapter is not None and not (adapter / "adapter_config.json").is_file():
        raise ReaderDataError(f"{adapter} holds no LoRA adapter (no adapter_config.json); give a run's adapter/ "
                              "folder or one of its checkpoints/checkpoint-N folders.")
    if settings.threads:
        torch.set_num_threads(settings.threads)
    model_dir, _gguf = base_model_dir(settings)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = [r for r in load_rows(settings.data_path) if r["split"] == "validation"]
    validation = [tokenize_example(tokenizer, r) for r in rows[: settings.validation_examples]]
    if not validation:
        raise ReaderDataError(f"{settings.data_path} has no validation example; build examples with "
                              "`python -m training reader-data`, which holds part of `train` out for validation.")
    dtype = torch.bfloat16 if settings.weights_dtype == "bfloat16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    started = time.perf_counter()
    scores = validation_scores(model, validation)
    return {**scores, "adapter": str(adapter) if adapter else None, "seconds": round(time.perf_counter() - started, 1)}


def _reader_trainer_class():
    from transformers import Trainer

    class ReaderTrainer(Trainer):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.model_accepts_loss_kwargs = True  # the loss below is already divided over the step's tokens

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = trained_token_loss(model, inputs, num_items_in_batch)
            return (loss, None) if return_outputs else loss

    return ReaderTrainer


def write_adapter(output: Path, *, base_gguf: Path | None, data_sha256: str, command: str, steps: int,
                  stats: dict, validation: dict, settings: SFTSettings) -> None:
    """The adapter's llama.cpp conversion (where the base is a GGUF) and its manifest."""
    from backend.llm.gguf_lora import write_gguf_adapter
    from backend.llm.reader_adapter import ADAPTER_DIR, ADAPTER_GGUF, model_sha256, write_manifest

    if base_gguf is not None:
        write_gguf_adapter(output / ADAPTER_DIR, base_gguf, output / ADAPTER_GGUF)
    write_manifest(output, base_model=base_gguf.name if base_gguf else settings.model,
                   base_model_sha256=model_sha256(base_gguf) if base_gguf else "",
                   data_sha256=data_sha256, command=command, steps=steps, examples=stats["examples"],
                   examples_by_source=stats["by_source"], trained_tokens=stats["trained_tokens"],
                   prompt_tokens=stats["prompt_tokens"], validation=validation,
                   settings={"epochs": settings.epochs, "learning_rate": settings.learning_rate,
                             "gradient_accumulation": settings.gradient_accumulation, "lora_r": settings.lora.r,
                             "lora_alpha": settings.lora.alpha, "lora_layers": settings.lora_layers,
                             "weights_dtype": settings.weights_dtype})


def check_same_examples(output: Path, data_sha256: str) -> None:
    """A run resumes only on the examples it started on."""
    log = output / LOG_FILE
    starts = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()
              if '"event": "start"' in line] if log.is_file() else []
    if starts and starts[0].get("data_sha256") != data_sha256:
        raise ReaderDataError(
            f"{output} was started on examples with sha256 {starts[0].get('data_sha256', '?')[:16]}..., and the examples "
            f"now have {data_sha256[:16]}...: resuming would mix two datasets. Give a new --output-dir, or delete "
            f"{output} to start over.")


def train_reader(settings: SFTSettings, *, command: str = "", progress: bool = True) -> Path:
    """Trains (or resumes) the reader's LoRA; returns the output folder, which then holds adapter/,
    adapter.gguf (where the base came from a GGUF) and manifest.json."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback, TrainingArguments
    from transformers.trainer_utils import get_last_checkpoint

    from training.policy import LORA_TARGETS

    if settings.threads:
        torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    output = settings.output_path
    output.mkdir(parents=True, exist_ok=True)
    model_dir, gguf = base_model_dir(settings)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    train, validation, stats = prepared_examples(settings, tokenizer)
    dtype = torch.bfloat16 if settings.weights_dtype == "bfloat16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    model.config.use_cache = False
    layers = model.config.num_hidden_layers
    trained_layers = list(range(max(0, layers - settings.lora_layers), layers)) if settings.lora_layers else None
    lora = settings.lora
    # No gradient reaches the layers below the LoRA ones (the input embeddings do not require it), so
    # they run forward only; no gradient checkpointing, which would make the inputs require it.
    model = get_peft_model(model, LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                             target_modules=LORA_TARGETS, layers_to_transform=trained_layers,
                                             task_type="CAUSAL_LM"))
    ReaderTrainer = _reader_trainer_class()
    steps_per_epoch = math.ceil(len(train) / settings.gradient_accumulation)
    total_steps = max(1, math.ceil(steps_per_epoch * settings.epochs))
    started_before = (output / CHECKPOINTS).is_dir() and any((output / CHECKPOINTS).iterdir())
    if started_before:
        check_same_examples(output, stats["data_sha256"])
    append_log(output, {"event": "start", "time": time.time(), "base": str(model_dir), **stats, "total_steps": total_steps})

    class StepLog(TrainerCallback):
        def __init__(self) -> None:
            self.started = time.perf_counter()
            self.validated: dict[int, dict] = {}  # step -> scores, so the last checkpoint's are not computed again

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                append_log(output, {"event": "step", "step": state.global_step, "loss": logs["loss"],
                                    "learning_rate": logs.get("learning_rate"), "grad_norm": logs.get("grad_norm"),
                                    "seconds": round(time.perf_counter() - self.started, 1),
                                    "peak_rss_gb": round(peak_rss_gb(), 2)})
                self.started = time.perf_counter()

        def on_save(self, args, state, control, **kwargs):
            if validation:
                started = time.perf_counter()
                scores = validation_scores(kwargs["model"], validation)
                self.validated[state.global_step] = scores
                append_log(output, {"event": "validation", "step": state.global_step, **scores,
                                    "seconds": round(time.perf_counter() - started, 1)})

    arguments = TrainingArguments(
        output_dir=str(output / CHECKPOINTS), per_device_train_batch_size=1,
        gradient_accumulation_steps=settings.gradient_accumulation, num_train_epochs=settings.epochs,
        learning_rate=settings.learning_rate, lr_scheduler_type="cosine", warmup_steps=settings.warmup_steps,
        logging_steps=1, save_steps=settings.save_steps, save_total_limit=2, report_to=[], use_cpu=True,
        dataloader_num_workers=0, remove_unused_columns=False, seed=settings.seed, disable_tqdm=not progress,
        save_only_model=False, weight_decay=0.0,
    )
    trainer = ReaderTrainer(model=model, args=arguments, train_dataset=ReadingDataset(train), data_collator=collate,
                            callbacks=[step_log := StepLog()])
    last = get_last_checkpoint(str(output / CHECKPOINTS)) if (output / CHECKPOINTS).is_dir() else None
    if last:
        append_log(output, {"event": "resume", "checkpoint": Path(last).name, "time": time.time()})
    trainer.train(resume_from_checkpoint=last)
    step = trainer.state.global_step
    final = step_log.validated.get(step) or (validation_scores(model, validation) if validation else {})
    if validation and step not in step_log.validated:
        append_log(output, {"event": "validation", "step": step, **final, "final": True})
    model.save_pretrained(str(output / "adapter"))
    write_adapter(output, base_gguf=gguf, data_sha256=stats["data_sha256"], command=command,
                  steps=trainer.state.global_step, stats=stats, validation=final, settings=settings)
    append_log(output, {"event": "done", "time": time.time(), "steps": trainer.state.global_step,
                        "peak_rss_gb": round(peak_rss_gb(), 2)})
    return output
