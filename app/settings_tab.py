"""The settings view: each role's backend, base URL and model; test the connection; apply."""

from __future__ import annotations

import gradio as gr

from app.render import esc
from app.session import AppContext, ReadOnlyModeError
from app.settings import ROLE_COLUMNS, apply_role, proposed_config, role_rows, test_connection
from backend.config import BACKENDS, ConfigError
from backend.llm.base import LLMError


def build_settings_tab(ctx: AppContext):
    """Returns (on_load function, its outputs) for page load."""
    roles = gr.Dataframe(headers=ROLE_COLUMNS, interactive=False, elem_id="roles-table")
    with gr.Row():
        role = gr.Dropdown(list(ctx.runtime.config.roles), value="planner", label="Role", elem_id="settings-role")
        backend = gr.Radio(list(BACKENDS), value=ctx.runtime.config.role("planner").backend, label="Backend",
                           elem_id="settings-backend")
    with gr.Row():
        base_url = gr.Textbox(label="Base URL (OpenAI-compatible)", placeholder="http://127.0.0.1:8000/v1",
                              elem_id="settings-base-url")
        model = gr.Textbox(label="Model name", placeholder="as `vllm serve` was given it", elem_id="settings-model")
        api_key = gr.Textbox(label="API key (optional, kept in memory only)", type="password", elem_id="settings-key")
    with gr.Row():
        test = gr.Button("Test connection", elem_id="settings-test")
        apply = gr.Button("Apply", variant="primary", elem_id="settings-apply")
    result = gr.Markdown(elem_id="settings-result")

    def current(role_name: str):
        r = ctx.runtime.config.role(role_name)
        return r.backend, r.base_url, r.model

    def check(role_name, b, url, name, key) -> str:
        try:
            proposed = proposed_config(ctx.runtime.config, role_name, b, url or "", name or "", key or "")
        except ConfigError as exc:
            return f"⚠️ Not valid: {esc(exc)}"
        return esc(test_connection(proposed.role(role_name), ctx.runtime, role_name))

    def save(role_name, b, url, name, key, request: gr.Request):
        try:
            ctx.require_writable()
            if not ctx.is_admin(request):
                return "⚠️ Only an admin can change the models of a shared deployment.", role_rows(ctx.runtime.config)
            with ctx.settings_lock:
                proposed = proposed_config(ctx.runtime.config, role_name, b, url or "", name or "", key or "")
                message = apply_role(ctx.runtime, proposed, role_name)
        except (ConfigError, LLMError, ReadOnlyModeError) as exc:
            return f"⚠️ Not applied: {esc(exc)}", role_rows(ctx.runtime.config)
        return f"✅ {esc(message)}", role_rows(ctx.runtime.config)

    role.change(current, [role], [backend, base_url, model])
    test.click(check, [role, backend, base_url, model, api_key], [result])
    apply.click(save, [role, backend, base_url, model, api_key], [result, roles])

    def load():
        return role_rows(ctx.runtime.config)

    return load, [roles]
