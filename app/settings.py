"""Changing a role's model while the app runs: validate, test the connection, rebuild that role."""

from __future__ import annotations

import time
from dataclasses import replace

from backend.config import BACKENDS, Config, ConfigError, RoleConfig, with_overrides
from backend.llm.base import LLMError
from backend.llm.openai_compat import OpenAIChatModel
from backend.runtime import Runtime, make_chat_model

ROLE_COLUMNS = ["role", "backend", "base URL", "model", "max new tokens"]


LOCAL_NAMES = {"llamacpp": "The llama.cpp model", "embedded": "Embedded model"}
LOCAL_DEFAULTS = {
    "llamacpp": lambda role: role.model_file or "Qwen2.5-Coder-1.5B-Instruct (llama.cpp)",
    "embedded": lambda role: role.model_dir or "SmolLM2-135M-Instruct (transformers)",
}


def role_rows(config: Config) -> list[list]:
    rows = []
    for name, role in config.roles.items():
        model = LOCAL_DEFAULTS[role.backend](role) if role.backend in LOCAL_DEFAULTS else role.model
        rows.append([name, role.backend, role.base_url or "-", model, role.max_new_tokens])
    return rows


def proposed_config(config: Config, role: str, backend: str, base_url: str, model: str, api_key: str) -> Config:
    """The config with one role changed, validated by backend.config (ConfigError names the key)."""
    if role not in config.roles:
        raise ConfigError(f"roles.{role}: unknown role; roles are {', '.join(config.roles)}.")
    if backend not in BACKENDS:
        raise ConfigError(f"roles.{role}.backend: must be one of {', '.join(BACKENDS)}, got {backend!r}.")
    current = config.role(role)
    if backend in LOCAL_DEFAULTS:
        new_role = replace(current, backend=backend, base_url="", model="", api_key="")
    else:
        new_role = replace(current, backend="openai", base_url=base_url.strip(), model=model.strip(),
                           api_key=api_key.strip() or current.api_key)
    return with_overrides(replace(config, roles={**config.roles, role: new_role}))


def test_connection(role: RoleConfig, runtime: Runtime, role_name: str) -> str:
    """One tiny request to the role's model: the latency, or the exact error."""
    started = time.perf_counter()
    try:
        if role.backend in LOCAL_DEFAULTS:
            loaded = runtime.config.role(role_name).backend == role.backend
            if not loaded:
                return f"The {role.backend} model is not loaded for this role yet; apply the setting to load it."
            runtime.agent.models[role_name].generate([{"role": "user", "content": "ping"}], max_new_tokens=1)
            return f"{LOCAL_NAMES[role.backend]} answered in {(time.perf_counter() - started) * 1000:.0f} ms."
        client = OpenAIChatModel(role.base_url, role.model, api_key=role.api_key or None,
                                 timeout_s=min(role.timeout_s, 15.0))
        try:
            seconds = client.ping()
        finally:
            client.close()
        return f"Connected to {role.model} at {client.base_url}: answered in {seconds * 1000:.0f} ms."
    except LLMError as exc:
        return f"Connection failed: {exc}"


def apply_role(runtime: Runtime, new_config: Config, role: str) -> str:
    """Rebuild one role's model from a validated config and swap it into the running agent. A served
    model must answer a one-token request first: a wrong URL or name is refused, never saved."""
    proposed = new_config.role(role)
    if proposed.backend == "openai":
        client = OpenAIChatModel(proposed.base_url, proposed.model, api_key=proposed.api_key or None,
                                 timeout_s=min(proposed.timeout_s, 15.0))
        try:
            client.ping()
        finally:
            client.close()
    model = make_chat_model(new_config, role, progress=False)
    runtime.agent.models[role] = model
    runtime.agent.config = new_config
    runtime.config = new_config
    return f"The {role} now uses {getattr(model, 'name', new_config.role(role).backend)}."
