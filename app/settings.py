"""Changing a role's model while the app runs: validate, test the connection, rebuild that role.

Settings are an admin's (or the single local user's): they reach servers on the network, and a
connection test follows the page-visit tool's address policy unless the admin allows private hosts.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from typing import TYPE_CHECKING

from app.connection_check import ConnectionProblem, ping_server
from backend.config import Config, ConfigError, RoleConfig, with_overrides
from backend.llm.base import LLMError
from backend.llm.registry import UnknownBackend, backend_spec
from backend.llm.openai_compat import normalise_base_url
from backend.runtime import Runtime, make_chat_model

if TYPE_CHECKING:
    import gradio as gr

    from app.session import AppContext

ADMINS_ONLY = ("Settings are for admins: they change the models every user's runs use and reach servers on "
               "the network. Ask the demo's host to change a model.")
PING_TIMEOUT_S = 15.0

ROLE_COLUMNS = ["role", "backend", "base URL", "model", "max new tokens"]



def settings_refusal(ctx: AppContext, request: gr.Request | None) -> str | None:
    """Why this person may not use Settings (a sentence), or None: the single local user and admins may."""
    return None if ctx.is_admin(request) else ADMINS_ONLY


def role_rows(config: Config) -> list[list]:
    rows = []
    for name, role in config.roles.items():
        model = backend_spec(role.backend).model_label(role)
        if role.adapter:
            model += f" + trained reader {Path(role.adapter).name}"
        rows.append([name, role.backend, role.base_url or "-", model, role.max_new_tokens])
    return rows


def proposed_config(config: Config, role: str, backend: str, base_url: str, model: str, api_key: str) -> Config:
    """The config with one role changed, validated by backend.config (ConfigError names the key)."""
    if role not in config.roles:
        raise ConfigError(f"roles.{role}: unknown role; roles are {', '.join(config.roles)}.")
    try:
        spec = backend_spec(backend)
    except UnknownBackend as exc:
        raise ConfigError(f"roles.{role}.backend: {exc}") from None
    current = config.role(role)
    if spec.local:
        new_role = replace(current, backend=backend, base_url="", model="", api_key="")
    else:
        new_role = replace(current, backend=backend, base_url=base_url.strip(), model=model.strip(),
                           api_key=api_key.strip() or current.api_key)
    return with_overrides(replace(config, roles={**config.roles, role: new_role}))


def test_connection(role: RoleConfig, runtime: Runtime, role_name: str, *, allow_private: bool = False) -> str:
    """One tiny request to the role's model: the latency, or what failed (for a served model: a status
    and a short reason of ours, never the server's words). `allow_private`: an admin's choice."""
    started = time.perf_counter()
    spec = backend_spec(role.backend)
    if spec.local:
        loaded = runtime.config.role(role_name).backend == role.backend
        if not loaded:
            return f"The {role.backend} model is not loaded for this role yet; apply the setting to load it."
        try:
            runtime.agent.models[role_name].generate([{"role": "user", "content": "ping"}], max_new_tokens=1)
        except LLMError as exc:
            return f"Connection failed: {exc}"
        return f"{spec.label} answered in {(time.perf_counter() - started) * 1000:.0f} ms."
    try:
        seconds = ping_server(role.base_url, role.model, role.api_key or None, allow_private=allow_private,
                              timeout_s=min(role.timeout_s, PING_TIMEOUT_S))
    except ConnectionProblem as exc:
        return f"Connection failed: {exc}"
    return f"Connected to {role.model} at {normalise_base_url(role.base_url)}: answered in {seconds * 1000:.0f} ms."


def apply_role(runtime: Runtime, new_config: Config, role: str, *, allow_private: bool = False) -> str:
    """Rebuild one role's model from a validated config and swap it into the running agent. A served
    model must answer a one-token request first (under the connection test's address policy): a
    wrong URL or name is refused, never saved; ConnectionProblem says why."""
    proposed = new_config.role(role)
    if not backend_spec(proposed.backend).local:
        ping_server(proposed.base_url, proposed.model, proposed.api_key or None, allow_private=allow_private,
                    timeout_s=min(proposed.timeout_s, PING_TIMEOUT_S))
    model = make_chat_model(new_config, role, progress=False)
    runtime.agent.models[role] = model
    runtime.agent.config = new_config
    runtime.config = new_config
    return f"The {role} now uses {getattr(model, 'name', new_config.role(role).backend)}."
