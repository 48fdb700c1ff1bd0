"""Changing a role's model while the app runs: validate, test the connection, rebuild that role.

Settings are an admin's (or the single local user's): they reach servers on the network, and a
connection test follows the page-visit tool's address policy unless the admin allows private hosts.
"""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

from typing import TYPE_CHECKING

from backend.config import Config, ConfigError, RoleConfig, with_overrides
from backend.llm.base import LLMError
from backend.llm.registry import CheckContext, UnknownBackend, backend_spec
from backend.runtime import Runtime, make_chat_model

if TYPE_CHECKING:
    import gradio as gr

    from app.session import AppContext

ADMINS_ONLY = ("Settings are for admins: they change the models every user's runs use and reach servers on "
               "the network. Ask the demo's host to change a model.")
PING_TIMEOUT_S = 15.0

ROLE_COLUMNS = ["role", "backend", "base URL", "model", "max new tokens"]
FORM_SETTINGS = ("base_url", "model", "api_key")  # the form's fields besides the backend


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
    """The config with one role changed, validated by backend.config (ConfigError names the key). The
    form's fields go to a backend that takes them and are cleared for one that does not; an empty API
    key keeps the one set before."""
    if role not in config.roles:
        raise ConfigError(f"roles.{role}: unknown role; roles are {', '.join(config.roles)}.")
    try:
        spec = backend_spec(backend)
    except UnknownBackend as exc:
        raise ConfigError(f"roles.{role}.backend: {exc}") from None
    current = config.role(role)
    given = {"base_url": base_url.strip(), "model": model.strip(), "api_key": api_key.strip() or current.api_key}
    defaults = {f.name: f.default for f in fields(RoleConfig)}
    new_role = replace(current, backend=backend,
                       **{key: given[key] if spec.takes(key) else defaults[key] for key in FORM_SETTINGS})
    return with_overrides(replace(config, roles={**config.roles, role: new_role}))


def _check(role: RoleConfig, loaded, allow_private: bool) -> str:
    spec = backend_spec(role.backend)
    if spec.connection_check is None:
        return f"The {role.backend} backend has no connection check; apply the setting and ask a question to try it."
    context = CheckContext(loaded=loaded, allow_private=allow_private, timeout_s=min(role.timeout_s, PING_TIMEOUT_S))
    return spec.connection_check(role, context)


def test_connection(role: RoleConfig, runtime: Runtime, role_name: str, *, allow_private: bool = False) -> str:
    """The backend's connection check (backend.llm.registry): a local model answers one token, a served
    one a tiny request; the latency, or what failed (for a served model: a status and a short reason
    of ours, never the server's words). `allow_private`: an admin's choice."""
    loaded = runtime.agent.models[role_name] if runtime.config.role(role_name).backend == role.backend else None
    try:
        return _check(role, loaded, allow_private)
    except LLMError as exc:
        return f"Connection failed: {exc}"


def apply_role(runtime: Runtime, new_config: Config, role: str, *, allow_private: bool = False) -> str:
    """Rebuild one role's model from a validated config and swap it into the running agent. The
    backend's connection check runs first with nothing loaded (under the connection test's address
    policy): a served model with a wrong URL or name is refused, never saved; an LLMError (a
    ConnectionProblem for a served model) says why."""
    _check(new_config.role(role), None, allow_private)
    model = make_chat_model(new_config, role, progress=False)
    runtime.agent.models[role] = model
    runtime.agent.config = new_config
    runtime.config = new_config
    return f"The {role} now uses {getattr(model, 'name', new_config.role(role).backend)}."
