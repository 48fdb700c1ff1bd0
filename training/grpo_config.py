"""Settings of a single-machine GRPO run, read from a YAML file and validated key by key.

The GRPO keys are flat (``steps``, ``learning_rate``, ...). The role and agent settings the
episodes share with the app are the app's own schema (backend/config.py), in the same sections
and under the same names as mia.toml, parsed and validated by the same code::

    agent:                  # mia.toml's [agent]
      max_turns: 2          # Executor turns per plan (0 = as the embedded model declares: 8)
      reflections: 1
      guided_actions: "on"  # "on", "off" or "auto" (auto = on: the trainer's models are embedded)
      plan_shape: subquestions  # or "steps": the plan both stages run (backend.hops)
      follow_links: true    # a guided turn searches the page the results name (backend/tools/page_links.py)
      tools: [search]       # the Executor's tools (backend/tools/registry.py); default: mia.toml's default list
                            # (no web access here: web_search and visit are never built)
    roles:                  # mia.toml's [roles.<role>]
      planner: {max_new_tokens: 64}
      executor: {max_new_tokens: 64}
    rewards:                # mia.toml's [rewards.executor] / [rewards.planner]; default: the paper's
      executor: {acc_weight: 0.7, tool_weight: 0.2, format_weight: 0.1}

Of `agent:` and `roles:` the trainer reads only the keys in `TRAINER_READS`; any other key of the
schema would be ignored, so it is refused with a sentence naming it. The environment overrides
of mia.toml (``MIA_AGENT_...``) do not apply here: a run is what its YAML says.

Model folders may be a path (relative to the repository) or one of two names:
``tiny-random`` (a 2-layer random Llama with SmolLM2's tokenizer, for smoke runs and tests) and
``smollm2`` (SmolLM2-135M-Instruct prepared from the packaged GGUF).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from backend.config import (
    ROLES,
    AgentConfig,
    ConfigError,
    RewardConfig,
    RoleConfig,
    agent_section,
    reward_section,
    role_sections,
)
from backend.llm.embedded import EMBEDDED_TRAITS
from training.policy import LoraSettings

REPO_ROOT = Path(__file__).resolve().parent.parent
MODEL_ALIASES = ("tiny-random", "smollm2")
TRAINING_ROLES = ("planner", "executor")
SHARED_SECTIONS = ("agent", "roles", "rewards")

# The keys of the shared sections the trainer reads; the others configure the app only.
TRAINER_READS = (
    "agent.max_turns", "agent.reflections", "agent.guided_actions", "agent.plan_shape", "agent.follow_links",
    "agent.tools",
    "roles.planner.max_new_tokens", "roles.executor.max_new_tokens",
)

# Flat keys of earlier training YAMLs and the shared key each became.
MOVED_KEYS = {
    "max_turns": "agent.max_turns",
    "reflections": "agent.reflections",
    "guided_actions": "agent.guided_actions",
    "executor_max_new_tokens": "roles.executor.max_new_tokens",
    "planner_max_new_tokens": "roles.planner.max_new_tokens",
}


class TrainingConfigError(ValueError):
    """A training setting is missing or invalid; the message names the key and what to do."""


def training_agent() -> AgentConfig:
    """The trainer's defaults for `agent:` (the app's are for a live question, not a rollout)."""
    return AgentConfig(max_turns=2, reflections=1, guided_actions="off", max_seconds=300.0)


def training_roles() -> dict[str, RoleConfig]:
    """The trainer's defaults for `roles:`: embedded models, short generations."""
    return {name: RoleConfig(backend="embedded", max_new_tokens=64) for name in ROLES}


class RepoRelativePaths:
    """Paths of a training YAML (`output_dir`, `cache_dir`, model folders): absolute, or relative to
    the repository."""

    def resolve(self, value: str) -> Path:
        path = Path(value)
        return path if path.is_absolute() else REPO_ROOT / path

    @property
    def output_path(self) -> Path:
        return self.resolve(self.output_dir)

    @property
    def cache_path(self) -> Path:
        return self.resolve(self.cache_dir)


@dataclass
class GRPOSettings(RepoRelativePaths):
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
    seed: int = 0
    threads: int = 1  # torch CPU threads; 1 is fastest for small models on a busy machine, 0 = torch's default
    lora: LoraSettings | None = field(default_factory=LoraSettings)
    # The sections shared with mia.toml (backend/config.py):
    agent: AgentConfig = field(default_factory=training_agent)
    roles: dict[str, RoleConfig] = field(default_factory=lambda: {n: training_roles()[n] for n in TRAINING_ROLES})
    rewards: RewardConfig = field(default_factory=RewardConfig)

    def role(self, name: str) -> RoleConfig:
        """As Config.role, so code that reads the app's config can read these settings too."""
        return self.roles[name]

    # What the episodes run with, derived from the shared sections as the app derives them:
    # "automatic" and "auto" resolve with the traits every embedded model declares.
    @property
    def max_turns(self) -> int:
        """Executor turns per plan: agent.max_turns, or the embedded model's own when it is 0."""
        return self.agent.turns_for(EMBEDDED_TRAITS)

    @property
    def reflections(self) -> int:
        return self.agent.reflections

    @property
    def guided_actions(self) -> bool:
        """The Executor's guided turns (thought -> sampled action choice -> prefilled action):
        agent.guided_actions "on", or "auto" (on: embedded models declare guided turns)."""
        return self.agent.guided_for(EMBEDDED_TRAITS)

    @property
    def plan_shape(self) -> str:
        """agent.plan_shape: "steps" (a numbered plan of actions) or "subquestions" (a decomposition
        researched hop by hop); stage 1's plans and stage 2's Planner prompt both follow it."""
        return self.agent.plan_shape

    @property
    def executor_max_new_tokens(self) -> int:
        return self.roles["executor"].max_new_tokens

    @property
    def planner_max_new_tokens(self) -> int:
        return self.roles["planner"].max_new_tokens


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
        (settings.threads >= 0, "threads", "must be 0 (torch's default) or a number of threads"),
        (bool(settings.dataset_file or settings.questions_file), "questions_file", "give a questions file or a dataset_file"),
    ]
    for ok, key, message in rules:
        if not ok:
            raise TrainingConfigError(f"{key}: {message}.")
    if settings.lora is not None and (settings.lora.r < 1 or settings.lora.alpha < 1 or not 0 <= settings.lora.dropout < 1):
        raise TrainingConfigError("lora: r and alpha must be at least 1 and dropout in [0, 1); or set `lora: null` for full fine-tuning.")


def _moved_message(key: str, value: Any) -> str:
    new = MOVED_KEYS[key]
    if key == "guided_actions" and isinstance(value, bool):
        value = "on" if value else "off"
    *sections, name = new.split(".")
    example = yaml.safe_dump({name: value}, default_flow_style=True).strip()
    for section in reversed(sections):
        example = f"{{{section}: {example}}}"
    message = f"{key} moved to {new} (the key of mia.toml's [{'.'.join(sections)}]); write {example[1:-1]}"
    if key == "guided_actions":
        message += ' ("on", "off" or "auto" instead of true/false; auto = on for the embedded models the trainer runs)'
    return message + "."


def _unread_keys(agent_raw: dict, roles_raw: dict) -> list[str]:
    given = [f"agent.{k}" for k in agent_raw]
    for role, values in roles_raw.items():
        given += [f"roles.{role}.{k}" for k in (values or {})] or [f"roles.{role}"]
    return [key for key in given if key not in TRAINER_READS]


def _shared_sections(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """agent:, roles: and rewards: parsed and validated by backend/config.py, over the trainer's defaults."""
    agent_raw, roles_raw = raw.get("agent") or {}, raw.get("roles") or {}
    try:
        agent = agent_section(agent_raw, base=training_agent())
        roles = role_sections(roles_raw, base=training_roles())
        rewards = reward_section(raw.get("rewards") or {})
    except ConfigError as exc:
        raise TrainingConfigError(f"{where}: {exc}") from None
    unread = _unread_keys(dict(agent_raw), dict(roles_raw))
    if unread:
        raise TrainingConfigError(
            f"{where}: {unread[0]}: the trainer does not read this setting (it configures the app); "
            f"of agent: and roles: it reads {', '.join(TRAINER_READS)}."
        )
    return {"agent": agent, "roles": {name: roles[name] for name in TRAINING_ROLES}, "rewards": rewards}


def settings_from_mapping(raw: dict[str, Any], *, where: str = "config") -> GRPOSettings:
    if not isinstance(raw, dict):
        raise TrainingConfigError(f"{where}: expected a mapping of settings at the top level.")
    known = {f.name: f for f in fields(GRPOSettings) if f.name not in SHARED_SECTIONS}
    kwargs: dict[str, Any] = _shared_sections(raw, where)
    for key, value in raw.items():
        if key in SHARED_SECTIONS:
            continue
        if key in MOVED_KEYS:
            raise TrainingConfigError(f"{where}: {_moved_message(key, value)}")
        if key not in known:
            raise TrainingConfigError(
                f"{where}: {key}: unknown setting; known settings are {', '.join(sorted([*known, *SHARED_SECTIONS]))}."
            )
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


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: only true/false are, so `guided_actions: on` stays the text "on" as in mia.toml."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_settings(path: Path | str, **overrides: Any) -> GRPOSettings:
    path = Path(path)
    if not path.is_file():
        raise TrainingConfigError(f"{path} does not exist; see training/configs/ for examples.")
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader) or {}
    except yaml.YAMLError as exc:
        raise TrainingConfigError(f"{path} is not valid YAML ({exc}).") from None
    if not isinstance(raw, dict):
        raise TrainingConfigError(f"{path}: expected a mapping of settings at the top level.")
    raw.update({k: v for k, v in overrides.items() if v is not None})
    return settings_from_mapping(raw, where=str(path))
