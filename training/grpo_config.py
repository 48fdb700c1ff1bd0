"""Settings of a single-machine GRPO run, read from a YAML file and validated key by key.

Model folders may be a path (relative to the repository) or one of two names:
``tiny-random`` (a 2-layer random Llama with SmolLM2's tokenizer, for smoke runs and tests) and
``smollm2`` (SmolLM2-135M-Instruct prepared from the packaged GGUF).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from training.policy import LoraSettings

REPO_ROOT = Path(__file__).resolve().parent.parent
MODEL_ALIASES = ("tiny-random", "smollm2")


class TrainingConfigError(ValueError):
    """A training setting is missing or invalid; the message names the key and what to do."""


@dataclass
class GRPOSettings:
    model_dir: str = "tiny-random"  # the policy's starting weights
    partner_model_dir: str = ""  # the frozen other role (Planner in stage 1, Executor in stage 2); "" = model_dir
    judge: str = "exact"  # "exact" (the Judge's answer-match rule) | "model" (the Judge on partner_model_dir)
    questions_file: str = "data/hotpotqa/train.jsonl"
    dataset_file: str = ""  # a parquet from `python -m training dataset`; "" = build from questions_file
    num_questions: int = 8
    output_dir: str = ".mia/training/run"
    cache_dir: str = ".mia/test-cache"  # holds index/ (wiki index) and models/ (prepared SmolLM2)
    steps: int = 2
    questions_per_step: int = 2
    rollouts_per_question: int = 4
    learning_rate: float = 1e-5
    temperature: float = 1.0
    clip_low: float = 0.2
    clip_high: float = 0.28
    updates_per_batch: int = 1
    max_grad_norm: float = 1.0
    max_turns: int = 2
    executor_max_new_tokens: int = 64
    planner_max_new_tokens: int = 64
    reflections: int = 1
    guided_actions: bool = False  # the Executor's guided turns (thought -> sampled action choice -> prefilled action), as the app runs the embedded Executor
    seed: int = 0
    threads: int = 1  # torch CPU threads; 1 is fastest for small models on a busy machine, 0 = torch's default
    lora: LoraSettings | None = field(default_factory=LoraSettings)

    def resolve(self, value: str) -> Path:
        path = Path(value)
        return path if path.is_absolute() else REPO_ROOT / path

    @property
    def output_path(self) -> Path:
        return self.resolve(self.output_dir)

    @property
    def cache_path(self) -> Path:
        return self.resolve(self.cache_dir)


def _check(settings: GRPOSettings) -> None:
    rules = [
        (settings.judge in ("exact", "model"), "judge", "must be 'exact' or 'model'"),
        (settings.num_questions >= 1, "num_questions", "must be at least 1"),
        (settings.steps >= 1, "steps", "must be at least 1"),
        (settings.questions_per_step >= 1, "questions_per_step", "must be at least 1"),
        (settings.rollouts_per_question >= 2, "rollouts_per_question",
         "must be at least 2 (GRPO compares rollouts of the same question)"),
        (settings.learning_rate > 0, "learning_rate", "must be positive"),
        (settings.temperature > 0, "temperature", "must be positive (rollouts are sampled)"),
        (0 <= settings.clip_low < 1 and settings.clip_high >= 0, "clip_low/clip_high", "must be in [0, 1) and >= 0"),
        (settings.updates_per_batch >= 1, "updates_per_batch", "must be at least 1"),
        (settings.max_turns >= 1, "max_turns", "must be at least 1"),
        (settings.executor_max_new_tokens >= 8, "executor_max_new_tokens", "must be at least 8"),
        (settings.planner_max_new_tokens >= 8, "planner_max_new_tokens", "must be at least 8"),
        (settings.reflections >= 0, "reflections", "must be 0 or more"),
        (settings.threads >= 0, "threads", "must be 0 (torch's default) or a number of threads"),
        (bool(settings.dataset_file or settings.questions_file), "questions_file", "give a questions file or a dataset_file"),
    ]
    for ok, key, message in rules:
        if not ok:
            raise TrainingConfigError(f"{key}: {message}.")
    if settings.lora is not None and (settings.lora.r < 1 or settings.lora.alpha < 1 or not 0 <= settings.lora.dropout < 1):
        raise TrainingConfigError("lora: r and alpha must be at least 1 and dropout in [0, 1); or set `lora: null` for full fine-tuning.")


def settings_from_mapping(raw: dict[str, Any], *, where: str = "config") -> GRPOSettings:
    if not isinstance(raw, dict):
        raise TrainingConfigError(f"{where}: expected a mapping of settings at the top level.")
    known = {f.name: f for f in fields(GRPOSettings)}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in known:
            raise TrainingConfigError(f"{where}: {key}: unknown setting; known settings are {', '.join(sorted(known))}.")
        if key == "lora":
            if value is None:
                kwargs["lora"] = None
                continue
            if not isinstance(value, dict) or set(value) - {"r", "alpha", "dropout"}:
                raise TrainingConfigError(f"{where}: lora: expected a mapping with r, alpha, dropout (or null for full fine-tuning).")
            kwargs["lora"] = LoraSettings(**value)
            continue
        expected = {"str": str, "int": int, "float": float, "bool": bool}[known[key].type]
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
            raise TrainingConfigError(f"{where}: {key}: expected {expected.__name__}, got {value!r}.")
        kwargs[key] = value
    settings = GRPOSettings(**kwargs)
    _check(settings)
    return settings


def load_settings(path: Path | str, **overrides: Any) -> GRPOSettings:
    path = Path(path)
    if not path.is_file():
        raise TrainingConfigError(f"{path} does not exist; see training/configs/ for examples.")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise TrainingConfigError(f"{path} is not valid YAML ({exc}).") from None
    raw.update({k: v for k, v in overrides.items() if v is not None})
    return settings_from_mapping(raw, where=str(path))
