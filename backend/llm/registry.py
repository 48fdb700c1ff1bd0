"""Every LLM backend a role may name, and everything the rest of the code asks of one.

A backend is one module with its ChatModel (e.g. backend/llm/llamacpp.py) plus one entry in
`BACKENDS` below. Each place that used to dispatch on the name (building the model, the settings a
role may give it, the evaluation manifest's identity, the Settings page's choices and connection
check, validation, the learner's weights and fast sampler, a Planner version's adapter) asks the
entry instead, so a backend that is not listed is refused with the names that are, never quietly
built as another kind. Heavy modules (torch, llama.cpp, httpx) load inside the entries' functions,
when a role first uses them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backend.config import Config, RoleConfig
    from backend.llm.adapters import AdapterVersion
    from backend.llm.base import ChatModel


class UnknownBackend(ValueError):
    """A role names a backend that is not in the registry."""


# The keys of [roles.<role>] that every backend takes; each entry's `settings` adds its own.
COMMON_SETTINGS = {
    "backend": "the entry of this registry the role runs on",
    "max_new_tokens": "tokens the role writes per call",
    "adapter": "Executor only: a trained reader (a folder with manifest.json, adapter/ and adapter.gguf; "
               "docs/training.md) the Executor's calls answer with; \"\" = the base weights",
}


@dataclass(frozen=True)
class CheckContext:
    """What a connection check may use. `loaded`: the role's running model when it already runs on the
    checked backend, else None. `allow_private`: an admin allowed private and loopback addresses.
    `timeout_s`: the longest wait for an answer."""

    loaded: ChatModel | None
    allow_private: bool
    timeout_s: float


# (role, context) -> the sentence Settings shows when the check passed; an LLMError whose message is
# safe to show when it failed.
ConnectionCheck = Callable[["RoleConfig", CheckContext], str]


@dataclass(frozen=True)
class BackendSpec:
    """`settings`: the keys of [roles.<role>] this backend takes beyond COMMON_SETTINGS, each with
    what it means (a role naming another key is refused with these; Settings' form sets base_url,
    model and api_key only where they are taken). `build(config, role, progress)`: the role's model.
    `identity(role)`: which model, as an evaluation manifest records it. `model_label(role)`: the
    Settings table's model column. `connection_check(role, context)`: Settings' "Test connection", also
    run before Apply builds the model (with nothing loaded), so a server that does not answer is never
    applied; None: the backend has no check, and Settings says so. `validate(prefix, role)`: raise
    ConfigError for fields this backend needs. `trainable_weights(config, role)`: where test-time
    learning finds the weights to train (a transformers folder, or a GGUF file dequantised on first
    training); raise ConfigError when there are none here. `planner_version(config, role, version)`:
    the model answering with a trained LoRA version. `publish_version(config, role, version)`: make a
    promoted version ready for other app processes to load. `fast_sampler(config, role, version)`: a
    model test-time learning samples a Planner version's rollouts on, faster than the trained copy and
    with its vocabulary (training/ttrl/fast_sampler.py; ttrl.sampler names the backend); None: the
    trained copy samples them."""

    name: str
    settings: Mapping[str, str]
    build: Callable[[Config, RoleConfig, bool], ChatModel]
    identity: Callable[[RoleConfig], str]
    model_label: Callable[[RoleConfig], str]
    connection_check: ConnectionCheck | None
    trainable_weights: Callable[[Config, RoleConfig], Path]
    planner_version: Callable[[Config, RoleConfig, AdapterVersion], ChatModel]
    validate: Callable[[str, RoleConfig], None] = lambda prefix, role: None
    publish_version: Callable[[Config, RoleConfig, AdapterVersion], None] = lambda config, role, version: None
    fast_sampler: Callable[[Config, RoleConfig, AdapterVersion], ChatModel] | None = None

    def takes(self, key: str) -> bool:
        return key in COMMON_SETTINGS or key in self.settings

    def setting_names(self) -> list[str]:
        return [*COMMON_SETTINGS, *self.settings]


def backend_spec(name: str) -> BackendSpec:
    try:
        return BACKENDS[name]
    except KeyError:
        raise UnknownBackend(f"must be one of {', '.join(BACKENDS)}, got {name!r}.") from None


def backend_names() -> list[str]:
    return list(BACKENDS)


def fast_sampler_names() -> list[str]:
    """The backends ttrl.sampler may name: those with a fast sampler."""
    return [name for name, spec in BACKENDS.items() if spec.fast_sampler is not None]


def loaded_model_check(label: str) -> ConnectionCheck:
    """The check of a model that runs in this process: one token from the role's loaded model (`label`
    names it in the sentence), or a sentence saying it loads when the setting is applied."""

    def check(role: RoleConfig, context: CheckContext) -> str:
        if context.loaded is None:
            return f"The {role.backend} model is not loaded for this role yet; apply the setting to load it."
        started = time.perf_counter()
        context.loaded.generate([{"role": "user", "content": "ping"}], max_new_tokens=1)
        return f"{label} answered in {(time.perf_counter() - started) * 1000:.0f} ms."

    return check


def planner_weights_source(config: Config) -> Path:
    """Where the weights test-time learning trains, and a Planner version's adapter applies to, come
    from before any dequantising: a folder (ttrl.base_model_dir, the embedded Planner's) or the
    llama.cpp Planner's GGUF file."""
    if config.ttrl.base_model_dir:
        return resolve_path(config, config.ttrl.base_model_dir)
    role = config.role("planner")
    return backend_spec(role.backend).trainable_weights(config, role)


def resolve_path(config: Config, value: str) -> Path:
    """A configured path: absolute, or relative to the folder holding the data directory."""
    path = Path(value)
    return path if path.is_absolute() else config.data_dir.parent / path


# -- llama.cpp: a GGUF file (default: Qwen2.5-Coder-1.5B-Instruct assembled from its wheels) ----------

def gguf_file(config: Config, role: RoleConfig, *, progress: bool = True) -> Path:
    from backend.llm.model_parts import assemble_qwen_gguf

    if role.model_file:
        return resolve_path(config, role.model_file)
    return assemble_qwen_gguf(config.model_cache_dir, progress=progress)


def reader_adapter_of(config: Config, role: RoleConfig):
    """The trained reader `role.adapter` names (backend.llm.reader_adapter), its manifest read; None
    without one."""
    from backend.llm.reader_adapter import read_reader_adapter

    return read_reader_adapter(resolve_path(config, role.adapter)) if role.adapter else None


def _build_llamacpp(config: Config, role: RoleConfig, progress: bool) -> ChatModel:
    from backend.llm.llamacpp import get_llamacpp_model
    from backend.llm.reader_adapter import check_base

    gguf = gguf_file(config, role, progress=progress)
    model = get_llamacpp_model(
        gguf, threads=role.threads, context_tokens=role.context_tokens,
        slots=role.slots, small=role.small_override, repetition_penalty=role.repetition_penalty,
    )
    reader = reader_adapter_of(config, role)
    if reader is None:
        return model
    check_base(reader, gguf)
    # The same loaded weights (every other role keeps them bare), the reader's LoRA on contexts of its own.
    return model.with_adapter(reader.gguf, name=f"{model.name}+reader:{reader.folder.name}", slots=role.slots)


def _llamacpp_version(config: Config, role: RoleConfig, version: AdapterVersion) -> ChatModel:
    from backend.llm.adapters import gguf_adapter_for

    base_model = _build_llamacpp(config, role, False)
    adapter = gguf_adapter_for(version, gguf_file(config, role, progress=False))
    return base_model.with_adapter(adapter, name=f"{base_model.name}+{version.name}")


def _publish_llamacpp(config: Config, role: RoleConfig, version: AdapterVersion) -> None:
    from backend.llm.adapters import gguf_adapter_for

    gguf_adapter_for(version, gguf_file(config, role, progress=False))


LLAMACPP = BackendSpec(
    name="llamacpp",
    settings={
        "model_file": "a GGUF file; \"\" = Qwen2.5-Coder-1.5B-Instruct assembled from its wheels",
        "threads": "CPU threads; 0 = every core",
        "context_tokens": "the context of each slot",
        "slots": "contexts (KV caches) over the one model: calls that run at once, each with its prefix cache "
                 "(four users' conversations each keep one: benchmarks/concurrent_users.py)",
        "repetition_penalty": "on the model's own output; 1.0 = off",
        "small": "treat the model as small (guided turns, tighter limits, overlap rule): auto, true or false; "
                 "auto = as the model declares",
    },
    build=_build_llamacpp,
    identity=lambda role: f"llamacpp:{role.model_file or 'Qwen2.5-Coder-1.5B-Instruct.Q4_K_M'}",
    model_label=lambda role: role.model_file or "Qwen2.5-Coder-1.5B-Instruct (llama.cpp)",
    connection_check=loaded_model_check("The llama.cpp model"),
    trainable_weights=lambda config, role: gguf_file(config, role, progress=False),
    planner_version=_llamacpp_version,
    publish_version=_publish_llamacpp,
    fast_sampler=_llamacpp_version,  # ~15 tokens/s here against the trained copy's ~2.3
)


# -- embedded: a transformers folder (default: SmolLM2-135M-Instruct prepared from its GGUF) -----------

def embedded_model_dir(config: Config, role: RoleConfig, *, progress: bool = True) -> Path:
    from backend.llm.gguf_import import prepare_embedded_model

    if role.model_dir:
        return resolve_path(config, role.model_dir)
    return prepare_embedded_model(config.model_cache_dir, progress=progress)


def _build_embedded(config: Config, role: RoleConfig, progress: bool) -> ChatModel:
    from backend.llm.embedded import get_embedded_model
    from backend.llm.gguf_import import default_gguf_path
    from backend.llm.reader_adapter import check_base

    adapter = resolve_path(config, role.adapter_dir) if role.adapter_dir else None
    reader = reader_adapter_of(config, role)
    if reader is not None:
        if role.model_dir or adapter is not None:
            from backend.config import ConfigError

            raise ConfigError("roles.executor.adapter: a trained reader applies to the packaged SmolLM2 weights only "
                              "on the embedded backend; remove model_dir and adapter_dir, or the adapter.")
        check_base(reader, default_gguf_path())
        adapter = reader.peft_dir
    return get_embedded_model(embedded_model_dir(config, role, progress=progress), adapter)


def _embedded_version(config: Config, role: RoleConfig, version: AdapterVersion) -> ChatModel:
    from backend.llm.embedded import EmbeddedChatModel

    return EmbeddedChatModel(planner_weights_source(config), adapter_dir=version.adapter_path)


def _embedded_identity(role: RoleConfig) -> str:
    adapter = f"+{role.adapter_dir}" if role.adapter_dir else ""
    return f"embedded:{role.model_dir or 'SmolLM2-135M-Instruct'}{adapter}"


EMBEDDED = BackendSpec(
    name="embedded",
    settings={
        "model_dir": "a transformers folder; \"\" = SmolLM2-135M-Instruct prepared from its GGUF",
        "adapter_dir": "a LoRA adapter folder merged into model_dir on load (a test-time-learning version)",
    },
    build=_build_embedded,
    identity=_embedded_identity,
    model_label=lambda role: role.model_dir or "SmolLM2-135M-Instruct (transformers)",
    connection_check=loaded_model_check("Embedded model"),
    trainable_weights=lambda config, role: embedded_model_dir(config, role, progress=False),
    planner_version=_embedded_version,
)


# -- openai: an OpenAI-compatible server (vLLM, llama-server, a hosted API) -------------------------

def _build_openai(config: Config, role: RoleConfig, progress: bool) -> ChatModel:
    from backend.llm.openai_compat import OpenAIChatModel

    reader = reader_adapter_of(config, role)
    if reader is not None:
        from backend.llm.adapters import ServedAdapterModel

        return ServedAdapterModel(role, reader.as_version())
    model = OpenAIChatModel(
        role.base_url, role.model, api_key=role.api_key or None, timeout_s=role.timeout_s,
        supports_images=role.supports_images, context_tokens=role.context_tokens,
        repetition_penalty=role.repetition_penalty,
    )
    if role.small_override is not None:
        model.traits = replace(model.traits, small=role.small_override)
    return model


def _validate_openai(prefix: str, role: RoleConfig) -> None:
    from backend.config import ConfigError

    if not role.base_url.startswith(("http://", "https://")):
        raise ConfigError(
            f"{prefix}.base_url: an OpenAI-compatible backend needs an http(s) URL such as "
            f"http://127.0.0.1:8000/v1, got {role.base_url!r}."
        )
    if not role.model:
        raise ConfigError(f"{prefix}.model: name the served model (as `vllm serve` was given it).")


def _ping_openai(role: RoleConfig, context: CheckContext) -> str:
    """A one-token chat request to the served model, under the page-visit tool's address policy."""
    from backend.llm.connection_check import ping_server
    from backend.llm.openai_compat import normalise_base_url

    seconds = ping_server(role.base_url, role.model, role.api_key or None, allow_private=context.allow_private,
                          timeout_s=context.timeout_s)
    return f"Connected to {role.model} at {normalise_base_url(role.base_url)}: answered in {seconds * 1000:.0f} ms."


def _served_weights(config: Config, role: RoleConfig) -> Path:
    from backend.config import ConfigError

    raise ConfigError(
        "ttrl.base_model_dir: the Planner is served, so test-time learning needs the served model's weights "
        "on this machine (a transformers folder) to train its LoRA adapter; set ttrl.base_model_dir or ttrl.enabled = false."
    )


def _served_version(config: Config, role: RoleConfig, version: AdapterVersion) -> ChatModel:
    from backend.llm.adapters import ServedAdapterModel

    return ServedAdapterModel(role, version)


def _publish_served(config: Config, role: RoleConfig, version: AdapterVersion) -> None:
    from backend.llm.adapters import register_served_adapter

    register_served_adapter(role.base_url, version, api_key=role.api_key, timeout_s=role.timeout_s)


OPENAI = BackendSpec(
    name="openai",
    settings={
        "base_url": "the server's OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1",
        "model": "the served model's name (as `vllm serve` was given it)",
        "api_key": "sent as a bearer token; \"\" = none",
        "supports_images": "the served model reads images",
        "timeout_s": "the longest wait for one answer, in seconds",
        "context_tokens": "the served model's context",
        "repetition_penalty": "vLLM's repetition_penalty; 1.0 = off",
        "small": "treat the model as small (guided turns, tighter limits, overlap rule): auto, true or false; "
                 "auto = as the model declares",
    },
    build=_build_openai,
    identity=lambda role: f"openai:{role.model}@{role.base_url}",
    model_label=lambda role: role.model,
    connection_check=_ping_openai,
    validate=_validate_openai,
    trainable_weights=_served_weights,
    planner_version=_served_version,
    publish_version=_publish_served,
)

BACKENDS: dict[str, BackendSpec] = {spec.name: spec for spec in (LLAMACPP, EMBEDDED, OPENAI)}
