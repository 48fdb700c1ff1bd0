"""Settings of the reader's supervised fine-tuning (the Executor stage on this machine), read from a
YAML file and validated key by key (training/configs/reader_*.yaml)::

    model: qwen               # "qwen": the app's Executor GGUF (roles.executor), dequantised once;
                              # "tiny-random" or "smollm2" for tests; or a transformers folder
    weights_dtype: float32    # the base weights while training ("bfloat16": half the memory, slower
                              # on a CPU without bfloat16 arithmetic)
    data: .mia/reader/examples.jsonl   # reading examples (python -m training reader-data)
    output_dir: .mia/reader/run       # checkpoints/, log.jsonl, then adapter/, adapter.gguf, manifest.json
    epochs: 1
    learning_rate: 1.0e-4
    gradient_accumulation: 8  # examples per optimiser step
    max_tokens: 2048          # a longer example is left out (counted in the log)
    save_steps: 20            # optimiser steps between checkpoints (a killed run resumes from the last)
    validation_examples: 24   # validation examples scored at each checkpoint (0: none)
    threads: 0                # torch threads; 0 = every core
    seed: 0
    lora: {r: 16, alpha: 32, dropout: 0.05}
    lora_layers: 8            # LoRA on the model's last N layers (0 = every layer): the layers below run
                              # forward only, with no gradient (on this CPU a step costs about 1.3 forward
                              # passes instead of 3, which is what makes the stage fit in hours)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from backend.config import ConfigError
from training.grpo_config import RepoRelativePaths
from training.policy import LoraSettings

MODEL_NAMES = ("qwen", "tiny-random", "smollm2")
DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class SFTSettings(RepoRelativePaths):
    model: str = "qwen"
    weights_dtype: str = "float32"
    data: str = ".mia/reader/examples.jsonl"
    output_dir: str = ".mia/reader/run"
    cache_dir: str = ".mia"
    epochs: float = 1.0
    learning_rate: float = 1.0e-4
    warmup_steps: int = 4
    gradient_accumulation: int = 8
    max_tokens: int = 2048
    max_examples: int = 0  # 0 = every training example
    save_steps: int = 20
    validation_examples: int = 24
    threads: int = 0
    seed: int = 0
    lora: LoraSettings = field(default_factory=lambda: LoraSettings(r=16, alpha=32, dropout=0.05))
    lora_layers: int = 8

    @property
    def data_path(self) -> Path:
        return self.resolve(self.data)


def _check(settings: SFTSettings) -> SFTSettings:
    problems = [
        (settings.weights_dtype in DTYPES, "weights_dtype", f"must be one of {', '.join(DTYPES)}"),
        (settings.epochs > 0, "epochs", "must be more than 0"),
        (settings.learning_rate > 0, "learning_rate", "must be more than 0"),
        (settings.gradient_accumulation >= 1, "gradient_accumulation", "must be at least 1"),
        (settings.max_tokens >= 64, "max_tokens", "must be at least 64"),
        (settings.save_steps >= 1, "save_steps", "must be at least 1"),
        (settings.validation_examples >= 0, "validation_examples", "must be 0 or more"),
        (settings.max_examples >= 0, "max_examples", "must be 0 or more"),
        (settings.threads >= 0, "threads", "must be 0 or more"),
        (settings.lora_layers >= 0, "lora_layers", "must be 0 (every layer) or more"),
        (settings.lora.r >= 1 and settings.lora.alpha >= 1, "lora", "r and alpha must be at least 1"),
        (0 <= settings.lora.dropout < 1, "lora.dropout", "must be in [0, 1)"),
    ]
    for ok, key, message in problems:
        if not ok:
            raise ConfigError(f"{key}: {message}.")
    return settings


def load_sft_settings(path: Path, **overrides: Any) -> SFTSettings:
    """The settings of a YAML file, then `overrides` (None values ignored); an unknown key is an error
    naming it."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path} does not exist; use one of training/configs/reader_*.yaml.")
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected key: value pairs.")
    raw.update({key: value for key, value in overrides.items() if value is not None})
    known = {f.name for f in fields(SFTSettings)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r}; the keys are {', '.join(sorted(known))}.")
    lora = raw.pop("lora", None) or {}
    if not isinstance(lora, dict) or set(lora) - {"r", "alpha", "dropout"}:
        raise ConfigError(f"{path}: lora takes r, alpha and dropout.")
    try:
        settings = SFTSettings(**raw, lora=LoraSettings(**{**{"r": 16, "alpha": 32, "dropout": 0.05}, **lora}))
    except TypeError as problem:
        raise ConfigError(f"{path}: {problem}.") from problem
    defaults = SFTSettings()
    for f in fields(SFTSettings):
        value, default = getattr(settings, f.name), getattr(defaults, f.name)
        wanted = (int, float) if isinstance(default, float) else type(default)
        if f.name != "lora" and (isinstance(value, bool) or not isinstance(value, wanted)):
            raise ConfigError(f"{path}: {f.name} must be a {type(default).__name__}, got {value!r}.")
    return _check(settings)
