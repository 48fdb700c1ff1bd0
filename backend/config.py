"""Configuration: one TOML file plus environment overrides, validated at start.

A bad value is a `ConfigError` that names the key (``roles.planner.backend``) and what to do;
nothing falls back to a silent default.

Every setting can be overridden by an environment variable, one rule for all (`env_name`):
``MIA_<SECTION>_<KEY>`` (``MIA_AGENT_MAX_TURNS=4``, ``MIA_PATHS_DATA_DIR=/srv/mia``,
``MIA_MEMORY_URL=postgresql+psycopg://...``, ``MIA_REWARDS_EXECUTOR_ACC_WEIGHT=0.8``) and
``MIA_<ROLE>_<KEY>`` for the roles (``MIA_PLANNER_BACKEND=openai``,
``MIA_PLANNER_BASE_URL=http://127.0.0.1:8000/v1``). ``MIA_DATA_DIR`` is the short name of
``MIA_PATHS_DATA_DIR``. ``MIA_CONFIG`` points at another TOML file.

The `[agent]`, `[roles.<role>]` and `[rewards.*]` sections are one schema with the GRPO trainer's
YAML (training/grpo_config.py): `agent_section`, `role_sections` and `reward_section` parse and
validate them for both, with the same messages.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Mapping, get_type_hints

from backend.llm.registry import BackendSpec, UnknownBackend, backend_spec, fast_sampler_names

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_PATH = REPO_ROOT / "mia.toml"
ROLES = ("planner", "executor", "manager", "judge")
SMALL_SETTINGS = ("auto", "true", "false")
# agent.tools: the tools the app offered before the list existed, in its order (backend/tools/registry.py
# builds each; web_search and visit need search.web, image_search images to search).
DEFAULT_TOOLS = ("search", "web_search", "visit", "image_search")


class ConfigError(ValueError):
    """A configuration value is missing or invalid; the message names the key."""


@dataclass(frozen=True)
class RoleConfig:
    """`[roles.<role>]`: a field for each key some backend takes. Which keys a backend takes, and what
    they mean, is its entry in backend.llm.registry (COMMON_SETTINGS and BackendSpec.settings); a role
    that names a key its backend does not take is refused (`role_sections`)."""

    backend: str = "llamacpp"
    model_file: str = ""
    threads: int = 0
    context_tokens: int = 4096
    slots: int = 4  # four users' conversations each keep a cache (benchmarks/concurrent_users.py: 3 evicted)
    repetition_penalty: float = 1.1
    small: str = "auto"
    model_dir: str = ""
    adapter_dir: str = ""
    adapter: str = ""  # the Executor's only
    base_url: str = ""
    model: str = ""
    api_key: str = ""
    supports_images: bool = False
    max_new_tokens: int = 192
    timeout_s: float = 120.0

    @property
    def small_override(self) -> bool | None:
        return None if self.small == "auto" else self.small == "true"


@dataclass(frozen=True)
class AgentConfig:
    max_turns: int = 0  # 0 = automatic: as the Executor's model declares (ModelTraits.executor_turns)
    reflections: int = 1
    memory_k: int = 2
    max_question_chars: int = 4000
    max_seconds: float = 600.0
    max_llm_calls: int = 0  # 0 = automatic: room for two rounds of Executor turns, reflection, verdict and summary
    max_tokens: int = 0  # prompt + completion tokens per question; 0 = no limit
    summary_max_words: int = 300
    sparse_memory_planner: str = "manager"  # who plans while memory is sparse: "manager" or "planner"
    guided_actions: str = "auto"  # "auto" (as the Executor's model declares: on for local models), "on" or "off"
    read_by_quote: bool = True  # a larger Executor copies the sentence that states an open answer before its final answer
    follow_links: bool = True  # a guided turn searches the page the results name that an open question needs next
    min_memory_similarity: float = 0.35  # relevance floor (cosine; chosen on train questions, docs/memory.md)
    plan_shape: str = "subquestions"  # "subquestions": hop by hop (backend.hops); "steps": a numbered plan of actions
    caption_min_similarity: float = 0.92  # the image index's nearest match is a caption only this similar (0-1)
    image_text_first: bool = True  # read the answer from the image's OCR text before any plan; stated there: answered
    taught_min_similarity: float = 0.85  # a person's answer is recalled for a rewording at least this similar (backend.taught)
    tools: tuple[str, ...] = DEFAULT_TOOLS  # the Executor's tools by name, in order (backend/tools/registry.py)

    # `executor`: the traits the Executor's model declares (backend.llm.base.ModelTraits).
    def guided_for(self, executor) -> bool:
        return self.guided_actions == "on" or (self.guided_actions == "auto" and executor.guided_turns)

    def turns_for(self, executor) -> int:
        return self.max_turns or executor.executor_turns

    def supplement_turns_for(self, executor) -> int:
        """Turns after a replan: half the first round's (at least 2); the conversation already holds
        what the first round found, and the supplementary plan has at most 3 steps."""
        return max(2, self.turns_for(executor) // 2)

    def llm_calls_for(self, executor) -> int:
        if self.max_llm_calls:
            return self.max_llm_calls
        # Room for two rounds of turns (a guided turn makes up to 3 calls), reflection, verdict, summary.
        per_turn = 3 if self.guided_for(executor) else 1
        return max(30, 2 * per_turn * self.turns_for(executor) + 12)


@dataclass(frozen=True)
class MemoryConfig:
    """How the memory store ranks memories for a question (`[memory]`; its `url` is Config.memory_url).

    The paper's contrastive score: ``similarity_weight * minmax(similarity) + win_rate_weight * win rate``,
    min-max over the bucket, the best `agent.memory_k` successful and failed memories taken apart.
    With an image caption, similarity = ``(1 - caption_weight) * cos(question) + caption_weight * cos(caption)``.
    The defaults are memory_db.scoring's (the paper's)."""

    similarity_weight: float = 0.7
    win_rate_weight: float = 0.3
    caption_weight: float = 0.2


@dataclass(frozen=True)
class ExecutorRewardConfig:
    """The Executor's GRPO reward: ``acc_weight * acc + tool_weight * tool + format_weight * format``
    (training/rewards.py). `acc` is `acc_before_replan` when correct before any replan,
    `acc_after_replan` when correct after one, 0 when wrong or the answer is longer than
    `max_answer_chars`. The defaults are the paper's."""

    acc_weight: float = 0.7
    tool_weight: float = 0.2
    format_weight: float = 0.1
    acc_before_replan: float = 1.2
    acc_after_replan: float = 1.0
    max_answer_chars: int = 100


@dataclass(frozen=True)
class PlannerRewardConfig:
    """The Planner's GRPO reward: ``acc_final_weight * acc_final + acc_first_weight * acc_first
    + format_weight * format + decision_weight * decision`` (training/rewards.py); the paper's defaults."""

    acc_final_weight: float = 0.7
    acc_first_weight: float = 0.2
    format_weight: float = 0.05
    decision_weight: float = 0.05


@dataclass(frozen=True)
class RewardConfig:
    """`[rewards.executor]` and `[rewards.planner]`: what GRPO (the trainer, test-time learning) rewards."""

    executor: ExecutorRewardConfig = field(default_factory=ExecutorRewardConfig)
    planner: PlannerRewardConfig = field(default_factory=PlannerRewardConfig)


@dataclass(frozen=True)
class SearchConfig:
    hybrid: bool = True  # BM25 + dense (MiniLM) fused by reciprocal rank; first use embeds the corpus once
    web: bool = False
    visit_allow_private: bool = False


@dataclass(frozen=True)
class AppConfig:
    host: str = "127.0.0.1"
    port: int = 7860
    max_image_bytes: int = 10_000_000
    max_document_bytes: int = 50_000_000  # one document file (PDF, DOCX, ...) added to a collection
    max_namespace_document_bytes: int = 2_000_000_000  # all of one namespace's documents (the shared ones too)
    upload_cache_bytes: int = 1_000_000_000  # Gradio's cache under data_dir (uploads, exports, reports); oldest go first
    upload_cache_age_s: int = 3600  # a cached file older than this is deleted
    # Addresses (or networks) of reverse proxies whose X-Forwarded-For names the client; "" = none:
    # the address a sign-in is counted against is the connection's own.
    trusted_proxies: str = ""


@dataclass(frozen=True)
class DocumentsConfig:
    """`[documents]`: what reading one added document may cost. Each file is read in a child process
    (backend/documents/parse_process.py); a file that needs more is refused with a sentence that
    names the setting."""

    max_pages: int = 2000  # PDF pages
    max_ocr_calls: int = 200  # images on pages without text, each read by one tesseract call
    max_passages: int = 5000
    max_seconds: float = 300.0  # wall clock of the reading process, OCR included; it is stopped at the limit
    max_memory_mb: int = 1024  # memory the reading process may take beyond what it starts with
    worker_nice: int = 19  # how much lower the reading process's CPU priority is (0-19)
    reads_per_user: int = 1  # documents one user's adds and re-indexes read at once; the rest wait their turn


LEARNER_WORKERS = ("process", "thread", "external")
LEARNER_WEIGHT_DTYPES = ("bfloat16", "float32")
LEARNERS = ("grpo", "rft", "none")
SELECTIONS = ("memory", "majority", "reader")
# ttrl.sampler: "auto", "transformers" (the trained copy) or a backend with a fast sampler (backend.llm.registry)
SAMPLERS = ("auto", "transformers")


@dataclass(frozen=True)
class LearningConfig:
    """Test-time learning (TTRL): feedback -> Planner rollouts -> memories + GRPO of the Planner's LoRA.

    `max_turns` and `max_new_tokens` size the learner's rollouts. They are their own settings, not
    the live agent's: a rollout is one of `rollouts_per_signal` background episodes and is kept
    short, so it reads neither agent.max_turns nor roles.<role>.max_new_tokens (one reflection per
    rollout is fixed in training/ttrl). The rollouts' Executor turns are guided as agent.guided_actions
    says for the live Executor's model."""

    enabled: bool = False
    rollouts_per_signal: int = 4  # plans the Planner proposes per question with a signal (the paper's n)
    signals_per_update: int = 4  # questions per GRPO update of the Planner
    rollouts_per_hour: int = 40  # budget: a busy demo cannot queue more work than this
    learning_rate: float = 1e-4
    temperature: float = 1.0
    lora_r: int = 16
    lora_alpha: int = 32
    canary_file: str = "data/ttrl/canary.jsonl"  # held-out questions with answers; relative to the repository
    canary_size: int = 4
    canary_tolerance: float = 0.0  # promote when canary reward >= current's - tolerance
    max_turns: int = 2  # Executor turns per plan in a rollout (the live agent's: agent.max_turns)
    max_new_tokens: int = 96  # Planner and Executor tokens per call in a rollout (live: roles.<role>.max_new_tokens)
    unsupervised: bool = False  # opt-in: questions without feedback are graded by the Judge's evaluators
    base_model_dir: str = ""  # the Planner's weights to train when the Planner is served; "" = the embedded model
    poll_seconds: float = 5.0
    # Where the learner runs: "process" (the app starts `python -m training ttrl worker`, nice'd, beside
    # it), "thread" (inside the app's process), "external" (you run the worker yourself: several app
    # processes, or another machine).
    worker: str = "process"
    worker_nice: int = 10  # how much lower the started worker's CPU priority is (0-19)
    lease_ttl_s: float = 60.0  # a learner that missed heartbeats this long has died; another may take over
    # The trained Planner copy's weights: "bfloat16" needs half the memory of "float32" (LoRA adapters
    # stay float32 either way); "float32" only on a CPU without bfloat16 arithmetic, where it samples faster.
    weights_dtype: str = "bfloat16"
    # "grpo": rollouts per signal and the paper's GRPO update; "rft": a supervised update on verified
    # successful plans (a run's, with no rollouts; or a stream question's rollouts graded correct;
    # training/ttrl/rft.py); both share the canary and promotion. "none": rollouts, the reported answer
    # and memories, no Planner update (the stream protocol's row without learning).
    learner: str = "grpo"
    # How a question's reported answer is chosen among its rollouts without the ground truth
    # (training/ttrl/selection.py): "memory" (the plan most like past successful ones), "majority", or
    # "reader" (the Executor's reader chooses among the distinct answers from every rollout's evidence).
    selection: str = "memory"
    # What samples the rollouts: "transformers" (the trained copy, ~2.3 tokens/s here) or "llamacpp" (a
    # llama.cpp Planner with the version's adapter, ~15 tokens/s; the trained copy only scores them);
    # "auto": llamacpp where the Planner runs on llama.cpp, the trained copy otherwise.
    sampler: str = "auto"
    # A file of the frozen Executor's greedy answers that other learners of the same model share
    # (backend.llm.memo.CallFile): the stream benchmark's variants ask the same questions, and where one's
    # Planner plans a question as another's did, its Executor's turns are read, not computed. "" = none.
    shared_executor_calls: str = ""


@dataclass(frozen=True)
class Config:
    data_dir: Path = REPO_ROOT / ".mia"
    memory_url: str = ""  # empty = sqlite file under data_dir
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    app: AppConfig = field(default_factory=AppConfig)
    documents: DocumentsConfig = field(default_factory=DocumentsConfig)
    ttrl: LearningConfig = field(default_factory=LearningConfig)
    rewards: RewardConfig = field(default_factory=RewardConfig)
    roles: Mapping[str, RoleConfig] = field(default_factory=lambda: {r: RoleConfig() for r in ROLES})

    @property
    def resolved_memory_url(self) -> str:
        return self.memory_url or f"sqlite:///{self.data_dir / 'memory.sqlite'}"

    @property
    def model_cache_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def index_cache_dir(self) -> Path:
        return self.data_dir / "index"

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

    def role(self, name: str) -> RoleConfig:
        return self.roles[name]


def _coerce(key: str, value: Any, target: type) -> Any:
    """Convert a TOML or environment value to the field's type, or raise naming the key."""
    if isinstance(value, EnvironmentValue):
        key = f"{key} (from {value.variable})"
    if target is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return value.lower() in ("1", "true", "yes", "on")
        raise ConfigError(f"{key}: expected true or false, got {value!r}.")
    if target is int:
        if isinstance(value, bool):
            raise ConfigError(f"{key}: expected a whole number, got {value!r}.")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected a whole number, got {value!r}.") from None
    if target is float:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected a number, got {value!r}.") from None
    if target is tuple:
        if isinstance(value, str):  # from the environment: names separated by commas
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
            raise ConfigError(f'{key}: expected a list of names such as ["search", "calculate"], got {value!r}.')
        return tuple(value)
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected text, got {value!r}.")
    return str(value)


_FIELD_TYPES = {"bool": bool, "int": int, "float": float, "str": str, "tuple[str, ...]": tuple}
# Settings that were replaced: a file or variable that still sets one is told what to write instead.
# Agent settings of variants measured, lost and removed (docs/results.md), each at the value that left it
# off. An evaluation manifest naming one at that value records an evaluation as it runs now; one that ran
# the variant can still be read and compared, and resumed only at REMOVED_SETTINGS_COMMIT, the last commit
# with them (backend.eval.spec).
REMOVED_AGENT_SETTINGS = {
    "quote_check": "off", "strategies_by_type": False, "plan_candidates": 1, "answer_candidates": 1,
    "decompose_unstated": False, "reader_example": False, "unverified_memory_weight": 0.0,
    "count_unverified_outcomes": False,
}
REMOVED_SETTINGS_COMMIT = "f8918e4"
REPLACED_SETTINGS = {
    "search.calculator": 'the tools are a list now: add "calculate" to agent.tools '
                         '(tools = ["search", "web_search", "visit", "image_search", "calculate"] in [agent])',
    **{f"agent.{name}": ("a variant that was measured, did no better and was removed (docs/results.md, "
                         f"\"Variants measured and removed\"; commit {REMOVED_SETTINGS_COMMIT} still has it): "
                         "remove the setting")
       for name in REMOVED_AGENT_SETTINGS},
}


def _build_section(cls: type, key_prefix: str, values: Mapping[str, Any], base: Any = None) -> Any:
    """`values` over `base` (default: the class's defaults), each coerced to its field's type."""
    known = {f.name: _FIELD_TYPES[f.type] for f in fields(cls) if f.type in _FIELD_TYPES}
    if not isinstance(values, Mapping):
        raise ConfigError(f"{key_prefix}: expected a table of settings, got {values!r}.")
    kwargs = {}
    for name, value in values.items():
        if f"{key_prefix}.{name}" in REPLACED_SETTINGS:
            raise ConfigError(f"{key_prefix}.{name}: {REPLACED_SETTINGS[f'{key_prefix}.{name}']}.")
        if name not in known:
            raise ConfigError(
                f"{key_prefix}.{name}: unknown setting; known settings are {', '.join(sorted(known))}."
            )
        kwargs[name] = _coerce(f"{key_prefix}.{name}", value, known[name])
    return replace(base, **kwargs) if base is not None else cls(**kwargs)


class EnvironmentValue(str):
    """A setting's value as an environment variable gave it; errors about it name the variable too."""

    variable: str


def _section_classes() -> dict[str, type]:
    """Each table of settings in mia.toml and its dataclass (``agent``, ``rewards.executor``,
    ``roles.planner``, ...), read off `Config`, so a section added there is overridable too."""
    sections: dict[str, type] = {}

    def walk(prefix: str, cls: type) -> None:
        for name, kind in get_type_hints(cls).items():
            if not is_dataclass(kind):
                continue
            if any(f.type in _FIELD_TYPES for f in fields(kind)):
                sections[prefix + name] = kind
            else:
                walk(f"{prefix}{name}.", kind)  # a table of tables: [rewards.executor], [rewards.planner]

    walk("", Config)
    sections.update({f"roles.{role}": RoleConfig for role in ROLES})
    return sections


# Every setting of mia.toml as its dotted key: data_dir and the memory store's URL are Config's own fields.
SETTING_KEYS = ("paths.data_dir", "memory.url", *(
    f"{section}.{f.name}" for section, cls in _section_classes().items() for f in fields(cls) if f.type in _FIELD_TYPES
    and not (f.name == "adapter" and section != "roles.executor")))  # only the Executor takes a trained reader
ENV_SHORT_NAMES = {"paths.data_dir": "MIA_DATA_DIR"}


def env_name(key: str) -> str:
    """The environment variable that overrides the setting `key`: ``agent.max_turns`` ->
    ``MIA_AGENT_MAX_TURNS``; a role's settings leave out ``roles`` (``MIA_PLANNER_BACKEND``)."""
    parts = key.split(".")
    return "MIA_" + "_".join(parts[1:] if parts[0] == "roles" else parts).upper()


def with_environment(raw: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The TOML tables with every setting an environment variable overrides replaced by its value."""
    merged = dict(raw)
    for key in SETTING_KEYS:
        names = [env_name(key)] + ([ENV_SHORT_NAMES[key]] if key in ENV_SHORT_NAMES else [])
        given = {name: environ[name] for name in names if name in environ}
        if not given:
            continue
        if len(set(given.values())) > 1:
            raise ConfigError(f"{key}: {' and '.join(given)} give different values; set only one of them.")
        variable, text = next(iter(given.items()))
        *path, setting = key.split(".")
        table = merged
        for depth, part in enumerate(path):  # copied on the way down: `raw` stays as the file gave it
            inner = table.get(part, {})
            if not isinstance(inner, Mapping):
                raise ConfigError(f"{'.'.join(path[:depth + 1])}: expected a table of settings, got {inner!r}.")
            table[part] = dict(inner)
            table = table[part]
        table[setting] = value = EnvironmentValue(text)
        value.variable = variable
    return merged


def _raise_first(checks: list[tuple[bool, str, str]]) -> None:
    for ok, key, message in checks:
        if not ok:
            raise ConfigError(f"{key}: {message}.")


def validate_agent(a: AgentConfig, key_prefix: str = "agent") -> None:
    _raise_first([
        (a.max_turns >= 0, f"{key_prefix}.max_turns", "must be 0 (automatic) or a positive number of turns"),
        (a.reflections >= 0, f"{key_prefix}.reflections", "must be 0 or more"),
        (a.memory_k >= 1, f"{key_prefix}.memory_k", "must be at least 1"),
        (-1.0 <= a.min_memory_similarity <= 1.0, f"{key_prefix}.min_memory_similarity",
         "must be a cosine similarity (-1 to 1)"),
        (0.0 <= a.caption_min_similarity <= 1.0, f"{key_prefix}.caption_min_similarity", "must be from 0 to 1"),
        (0.0 < a.taught_min_similarity <= 1.0, f"{key_prefix}.taught_min_similarity",
         "must be a cosine similarity above 0 (up to 1)"),
        (a.max_question_chars >= 10, f"{key_prefix}.max_question_chars", "must be at least 10"),
        (a.max_seconds > 0, f"{key_prefix}.max_seconds", "must be positive"),
        (a.summary_max_words >= 20, f"{key_prefix}.summary_max_words", "must be at least 20"),
        (a.max_llm_calls >= 0, f"{key_prefix}.max_llm_calls", "must be 0 (automatic) or a positive number of calls"),
        (a.max_tokens >= 0, f"{key_prefix}.max_tokens", "must be 0 (no limit) or a positive number of tokens"),
        (a.guided_actions in ("auto", "on", "off"), f"{key_prefix}.guided_actions", 'must be "auto", "on" or "off"'),
        (a.plan_shape in ("steps", "subquestions"), f"{key_prefix}.plan_shape", 'must be "steps" or "subquestions"'),
        (
            a.sparse_memory_planner in ("manager", "planner"),
            f"{key_prefix}.sparse_memory_planner",
            'must be "manager" (the paper\'s routing) or "planner"',
        ),
    ])
    validate_tools(a.tools, f"{key_prefix}.tools")


def validate_tools(names: tuple[str, ...], key: str) -> None:
    """Each name once, and each one a tool the registry builds (a ConfigError lists the known names)."""
    repeated = next((name for i, name in enumerate(names) if name in names[:i]), None)
    if repeated is not None:
        raise ConfigError(f"{key}: {repeated!r} is listed twice; list each tool once.")
    if tuple(names) != DEFAULT_TOOLS:  # the registry imports every tool's libraries; the default needs no look
        from backend.tools.registry import unknown_tool_problem

        problem = unknown_tool_problem(names, key)
        if problem:
            raise ConfigError(problem)


def role_backend(prefix: str, role: RoleConfig) -> BackendSpec:
    """The registry's entry for the role's backend; `prefix`: the role's key, ``roles.<name>``."""
    try:
        return backend_spec(role.backend)
    except UnknownBackend as exc:
        raise ConfigError(f"{prefix}.backend: {exc}") from None


def check_role_keys(prefix: str, role: RoleConfig, named: Mapping[str, Any]) -> None:
    """Each key a file or the environment `named` for the role is one its backend takes."""
    spec = role_backend(prefix, role)
    for key, value in named.items():
        if not spec.takes(key):
            source = f" (from {value.variable})" if isinstance(value, EnvironmentValue) else ""
            raise ConfigError(f"{prefix}.{key}{source}: the {spec.name} backend does not take {key}; it takes "
                              f"{', '.join(spec.setting_names())} (backend.llm.registry). Remove it, or set the "
                              "backend it belongs to.")


def validate_role(prefix: str, role: RoleConfig) -> None:
    """`prefix`: the role's key, ``roles.<name>``."""
    spec = role_backend(prefix, role)
    spec.validate(prefix, role)
    if role.small not in SMALL_SETTINGS:
        raise ConfigError(f"{prefix}.small: must be one of {', '.join(SMALL_SETTINGS)}, got {role.small!r}.")
    if role.repetition_penalty <= 0:
        raise ConfigError(f"{prefix}.repetition_penalty: must be positive (1.0 = off).")
    if role.threads < 0:
        raise ConfigError(f"{prefix}.threads: must be 0 (every core) or a positive number of threads.")
    if role.slots < 1:
        raise ConfigError(f"{prefix}.slots: must be at least 1.")
    if role.context_tokens < 512:
        raise ConfigError(f"{prefix}.context_tokens: must be at least 512.")
    if role.max_new_tokens < 8:
        raise ConfigError(f"{prefix}.max_new_tokens: must be at least 8.")
    if role.timeout_s <= 0:
        raise ConfigError(f"{prefix}.timeout_s: must be positive.")
    if role.adapter and prefix.rsplit(".", 1)[-1] != "executor":
        raise ConfigError(f"{prefix}.adapter: only the Executor answers with a trained reader adapter; remove it here "
                          "and set roles.executor.adapter.")


def _validate_weights(prefix: str, weights: Mapping[str, float]) -> None:
    for name, value in weights.items():
        if value < 0:
            raise ConfigError(f"{prefix}.{name}: must be 0 or more (a weight).")
    if not any(weights.values()):
        raise ConfigError(f"{prefix}: the weights {', '.join(weights)} are all 0; at least one must be positive.")


def validate_rewards(r: RewardConfig, key_prefix: str = "rewards") -> None:
    e, p = r.executor, r.planner
    _validate_weights(f"{key_prefix}.executor",
                      {"acc_weight": e.acc_weight, "tool_weight": e.tool_weight, "format_weight": e.format_weight})
    _raise_first([
        (e.acc_before_replan >= 0, f"{key_prefix}.executor.acc_before_replan", "must be 0 or more"),
        (e.acc_after_replan >= 0, f"{key_prefix}.executor.acc_after_replan", "must be 0 or more"),
        (e.max_answer_chars >= 1, f"{key_prefix}.executor.max_answer_chars", "must be at least 1"),
    ])
    _validate_weights(f"{key_prefix}.planner", {
        "acc_final_weight": p.acc_final_weight, "acc_first_weight": p.acc_first_weight,
        "format_weight": p.format_weight, "decision_weight": p.decision_weight,
    })


def validate_memory(m: MemoryConfig, key_prefix: str = "memory") -> None:
    _validate_weights(key_prefix, {"similarity_weight": m.similarity_weight, "win_rate_weight": m.win_rate_weight})
    _raise_first([
        (0.0 <= m.caption_weight <= 1.0, f"{key_prefix}.caption_weight",
         "must be from 0 (the question alone) to 1 (the caption alone)"),
    ])


def validate_documents(d: DocumentsConfig) -> None:
    _raise_first([
        (d.max_pages >= 1, "documents.max_pages", "must be at least 1"),
        (d.max_ocr_calls >= 1, "documents.max_ocr_calls", "must be at least 1"),
        (d.max_passages >= 1, "documents.max_passages", "must be at least 1"),
        (d.max_seconds > 0, "documents.max_seconds", "must be positive"),
        (d.max_memory_mb >= 64, "documents.max_memory_mb", "must be at least 64 (the parsers' own working memory)"),
        (0 <= d.worker_nice <= 19, "documents.worker_nice", "must be 0-19"),
        (d.reads_per_user >= 1, "documents.reads_per_user", "must be at least 1"),
    ])


def _validate(config: Config) -> None:
    app, t = config.app, config.ttrl
    _raise_first([
        (t.rollouts_per_signal >= 2, "ttrl.rollouts_per_signal", "must be at least 2 (GRPO compares plans of one question)"),
        (t.signals_per_update >= 1, "ttrl.signals_per_update", "must be at least 1"),
        (t.rollouts_per_hour >= t.rollouts_per_signal, "ttrl.rollouts_per_hour",
         "must allow at least one question's rollouts (>= rollouts_per_signal)"),
        (t.learning_rate > 0, "ttrl.learning_rate", "must be positive"),
        (t.temperature > 0, "ttrl.temperature", "must be positive (rollouts are sampled)"),
        (t.lora_r >= 1 and t.lora_alpha >= 1, "ttrl.lora_r/lora_alpha", "must be at least 1"),
        (t.canary_size >= 1, "ttrl.canary_size", "must be at least 1"),
        (t.canary_tolerance >= 0, "ttrl.canary_tolerance", "must be 0 or more"),
        (t.max_turns >= 1, "ttrl.max_turns", "must be at least 1"),
        (t.max_new_tokens >= 8, "ttrl.max_new_tokens", "must be at least 8"),
        (t.poll_seconds > 0, "ttrl.poll_seconds", "must be positive"),
        (t.worker in LEARNER_WORKERS, "ttrl.worker", f"must be one of {', '.join(LEARNER_WORKERS)}"),
        (0 <= t.worker_nice <= 19, "ttrl.worker_nice", "must be 0-19"),
        (t.lease_ttl_s >= 5, "ttrl.lease_ttl_s", "must be at least 5 seconds"),
        (t.weights_dtype in LEARNER_WEIGHT_DTYPES, "ttrl.weights_dtype", f"must be one of {', '.join(LEARNER_WEIGHT_DTYPES)}"),
        (t.learner in LEARNERS, "ttrl.learner", f"must be one of {', '.join(LEARNERS)}"),
        (t.selection in SELECTIONS, "ttrl.selection", f"must be one of {', '.join(SELECTIONS)}"),
        (t.sampler in (*SAMPLERS, *fast_sampler_names()), "ttrl.sampler",
         f"must be one of {', '.join((*SAMPLERS, *fast_sampler_names()))}"),
    ])
    validate_agent(config.agent)
    validate_memory(config.memory)
    validate_rewards(config.rewards)
    validate_documents(config.documents)
    _raise_first([
        (0 < app.port < 65536, "app.port", "must be a TCP port (1-65535)"),
        (app.max_image_bytes > 0, "app.max_image_bytes", "must be positive"),
        (app.max_document_bytes > 0, "app.max_document_bytes", "must be positive"),
        (app.max_namespace_document_bytes >= app.max_document_bytes, "app.max_namespace_document_bytes",
         "must be at least app.max_document_bytes"),
        (app.upload_cache_bytes >= max(app.max_image_bytes, app.max_document_bytes), "app.upload_cache_bytes",
         "must hold at least one upload of the largest size allowed (app.max_image_bytes, app.max_document_bytes)"),
        (app.upload_cache_age_s >= 60, "app.upload_cache_age_s", "must be at least 60 seconds"),
    ])
    _validate_trusted_proxies(app.trusted_proxies)
    for name, role in config.roles.items():
        validate_role(f"roles.{name}", role)


def _validate_trusted_proxies(value: str) -> None:
    for entry in filter(None, (part.strip() for part in value.split(","))):
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ConfigError(
                f"app.trusted_proxies: {entry!r} is not an IP address or network; name your reverse proxy's "
                "address (e.g. 127.0.0.1), several separated by commas, or leave it empty when there is none."
            ) from None


# ---- the shared sections, for mia.toml and the trainer's YAML alike -------------------------------

def agent_section(values: Mapping[str, Any], *, base: AgentConfig | None = None) -> AgentConfig:
    """`[agent]` (or a YAML's `agent:`) over `base`, coerced and validated; a ConfigError names the key."""
    agent = _build_section(AgentConfig, "agent", values, base)
    validate_agent(agent)
    return agent


def role_sections(
    raw_roles: Mapping[str, Any], *, base: Mapping[str, RoleConfig] | None = None,
    names: tuple[str, ...] = ROLES,
) -> dict[str, RoleConfig]:
    """`[roles.<role>]` for each of `names` over `base`, coerced and validated."""
    if not isinstance(raw_roles, Mapping):
        raise ConfigError(f"roles: expected a table of roles ({', '.join(names)}), got {raw_roles!r}.")
    for name in raw_roles:
        if name not in names:
            raise ConfigError(f"roles.{name}: unknown role; roles are {', '.join(names)}.")
    roles = {}
    for name in names:
        values = dict(raw_roles.get(name) or {})
        roles[name] = _build_section(RoleConfig, f"roles.{name}", values, None if base is None else base[name])
        check_role_keys(f"roles.{name}", roles[name], values)
        validate_role(f"roles.{name}", roles[name])
    return roles


def reward_section(raw: Mapping[str, Any]) -> RewardConfig:
    """`[rewards.executor]` and `[rewards.planner]` over the paper's values, coerced and validated."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"rewards: expected the tables executor and planner, got {raw!r}.")
    for key in raw:
        if key not in ("executor", "planner"):
            raise ConfigError(f"rewards.{key}: unknown section; the reward sections are executor and planner.")
    parts = {}
    for name, cls in (("executor", ExecutorRewardConfig), ("planner", PlannerRewardConfig)):
        values = dict(raw.get(name) or {})
        parts[name] = _build_section(cls, f"rewards.{name}", values)
    rewards = RewardConfig(**parts)
    validate_rewards(rewards)
    return rewards


def load_config(path: Path | str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read the TOML file (``MIA_CONFIG`` or ``mia.toml``), apply environment overrides, validate."""
    environ = os.environ if environ is None else environ
    path = Path(path or environ.get("MIA_CONFIG") or DEFAULT_CONFIG_PATH)
    raw: dict[str, Any] = {}
    if path.exists():
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML ({exc}); fix the file or point MIA_CONFIG elsewhere.") from None
    elif path != DEFAULT_CONFIG_PATH:
        raise ConfigError(f"MIA_CONFIG: the file {path} does not exist.")

    known_top = {"paths", "memory", "agent", "search", "app", "documents", "ttrl", "rewards", "roles"}
    for key in raw:
        if key not in known_top:
            raise ConfigError(f"{key}: unknown section; known sections are {', '.join(sorted(known_top))}.")
    for key, instead in REPLACED_SETTINGS.items():
        if env_name(key) in environ:
            raise ConfigError(f"{key} (from {env_name(key)}): {instead}.")
    raw = with_environment(raw, environ)

    paths = dict(raw.get("paths", {}))
    memory = dict(raw.get("memory", {}))
    for key in paths:
        if key != "data_dir":
            raise ConfigError(f"paths.{key}: unknown setting; the only one is data_dir.")
    memory_keys = {"url"} | {f.name for f in fields(MemoryConfig)}
    for key in memory:
        if key not in memory_keys:
            raise ConfigError(f"memory.{key}: unknown setting; known settings are {', '.join(sorted(memory_keys))}.")
    data_dir = paths.get("data_dir", str(REPO_ROOT / ".mia"))
    memory_url = memory.pop("url", "")
    if not isinstance(data_dir, str) or not data_dir:
        raise ConfigError("paths.data_dir: expected a folder path.")
    if not isinstance(memory_url, str):
        raise ConfigError("memory.url: expected an SQLAlchemy URL such as sqlite:///memory.sqlite.")
    data_path = Path(str(data_dir))
    if not data_path.is_absolute():
        data_path = (path.parent if path.exists() else REPO_ROOT) / data_path

    sections = {}
    for name, cls in (("agent", AgentConfig), ("search", SearchConfig), ("app", AppConfig), ("documents", DocumentsConfig),
                      ("ttrl", LearningConfig)):
        sections[name] = _build_section(cls, name, raw.get(name, {}))
    sections["memory"] = _build_section(MemoryConfig, "memory", memory)
    sections["rewards"] = reward_section(raw.get("rewards", {}))
    roles = role_sections(raw.get("roles", {}))

    config = Config(data_dir=data_path, memory_url=str(memory_url), roles=roles, **sections)
    _validate(config)
    return config


def with_overrides(config: Config, **agent_overrides: Any) -> Config:
    """A copy of the config with some agent settings changed (tests, the evaluation harness)."""
    agent = replace(config.agent, **agent_overrides)
    new = replace(config, agent=agent)
    _validate(new)
    return new
