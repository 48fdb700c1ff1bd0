"""The settings view: each role's backend, base URL and model; test the connection; apply.

For admins only (or the single local user without logins): everyone else sees why, and nothing else.
"""

from __future__ import annotations

import gradio as gr

from app.escaping import escape_markdown
from app.session import AppContext, ReadOnlyModeError
from app.settings import ROLE_COLUMNS, apply_role, proposed_config, role_rows, settings_refusal, test_connection
from backend.config import ConfigError
from backend.llm.base import LLMError
from backend.llm.registry import backend_names


def build_settings_tab(ctx: AppContext):
    """Returns (on_load function, its outputs) for page load. The backends offered are the registry's
    (backend.llm.registry) as the page is built."""
    notice = gr.Markdown(elem_id="settings-notice")
    roles = gr.Dataframe(headers=ROLE_COLUMNS, interactive=False, elem_id="roles-table")
    with gr.Row():
        role = gr.Dropdown(list(ctx.runtime.config.roles), value="planner", label="Role", elem_id="settings-role")
        backend = gr.Radio(backend_names(), value=ctx.runtime.config.role("planner").backend, label="Backend",
                           elem_id="settings-backend")
    with gr.Row():
        base_url = gr.Textbox(label="Base URL (OpenAI-compatible)", placeholder="http://127.0.0.1:8000/v1",
                              elem_id="settings-base-url")
        model = gr.Textbox(label="Model name", placeholder="as `vllm serve` was given it", elem_id="settings-model")
        api_key = gr.Textbox(label="API key (optional, kept in memory only)", type="password", elem_id="settings-key")
    allow_private = gr.Checkbox(label="Allow private hosts (a server on this machine or its network, such as "
                                      "127.0.0.1)", value=False, elem_id="settings-allow-private")
    with gr.Row():
        test = gr.Button("Test connection", elem_id="settings-test")
        apply = gr.Button("Apply", variant="primary", elem_id="settings-apply")
    result = gr.Markdown(elem_id="settings-result")

    def current(role_name: str, request: gr.Request):
        if settings_refusal(ctx, request):
            return gr.update(), "", ""
        r = ctx.runtime.config.role(role_name)
        return r.backend, r.base_url, r.model

    def check(role_name, b, url, name, key, private, request: gr.Request) -> str:
        refusal = settings_refusal(ctx, request)
        if refusal:
            return f"⚠️ {escape_markdown(refusal)}"
        try:
            proposed = proposed_config(ctx.runtime.config, role_name, b, url or "", name or "", key or "")
        except ConfigError as exc:
            return f"⚠️ Not valid: {escape_markdown(exc)}"
        return escape_markdown(test_connection(proposed.role(role_name), ctx.runtime, role_name,
                                               allow_private=bool(private)))

    def save(role_name, b, url, name, key, private, request: gr.Request):
        refusal = settings_refusal(ctx, request)
        if refusal:
            return f"⚠️ {escape_markdown(refusal)}", []
        try:
            ctx.require_writable()
            with ctx.settings_lock:
                proposed = proposed_config(ctx.runtime.config, role_name, b, url or "", name or "", key or "")
                message = apply_role(ctx.runtime, proposed, role_name, allow_private=bool(private))
        except (ConfigError, LLMError, ReadOnlyModeError) as exc:
            return f"⚠️ Not applied: {escape_markdown(exc)}", role_rows(ctx.runtime.config)
        return f"✅ {escape_markdown(message)}", role_rows(ctx.runtime.config)

    role.change(current, [role], [backend, base_url, model])
    inputs = [role, backend, base_url, model, api_key, allow_private]
    test.click(check, inputs, [result])
    apply.click(save, inputs, [result, roles])

    def load(request: gr.Request):
        refusal = settings_refusal(ctx, request)
        if refusal:
            return f"⚠️ {escape_markdown(refusal)}", []
        return "", role_rows(ctx.runtime.config)

    return load, [notice, roles]
