"""The Gradio web UI: research, memory, learning and settings views over one runtime."""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import gradio as gr
from gradio.utils import get_upload_folder
from starlette.middleware import Middleware

from app.auth import UserDirectory
from app.documents_tab import build_documents_tab
from app.escaping import escape_markdown
from app.learning_tab import build_learning_tab
from app.login_guard import ClientAddress, LoginGuard
from app.memory_tab import build_memory_tab, linked_memory
from app.page_style import PAGE_CSS, theme
from app.research_tab import build_research_tab
from app.session import AppContext
from app.settings_tab import build_settings_tab
from app.upload_cache import BoundedUploads, UploadCache, use_upload_cache
from app.user_files import OwnFilesOnly
from backend.config import Config, ConfigError
from backend.runtime import Runtime, build_runtime

log = logging.getLogger(__name__)

INTRO = (
    "# MIA research assistant\n"
    "Ask a research question. You will see the memories retrieved, the Planner's blueprint, each "
    "Executor step with its tool calls and passages, the answer, the Judge's verdict and the memory stored."
)


def build_ui(ctx: AppContext) -> gr.Blocks:
    with gr.Blocks(title="MIA research assistant") as demo:
        gr.Markdown(INTRO)
        who = gr.Markdown(elem_id="who")
        with gr.Tabs() as tabs:
            with gr.Tab("Research", id="research", elem_id="tab-research"):
                load_history, history = build_research_tab(ctx)
            with gr.Tab("Documents", id="documents", elem_id="tab-documents") as documents_tab:
                load_documents, documents_outputs = build_documents_tab(ctx)
            with gr.Tab("Memory", id="memory", elem_id="tab-memory") as memory_tab:
                load_memory, memory_outputs = build_memory_tab(ctx)
            with gr.Tab("Learning", id="learning", elem_id="tab-learning") as learning_tab:
                load_learning, learning_outputs = build_learning_tab(ctx)
            with gr.Tab("Settings", id="settings", elem_id="tab-settings"):
                load_settings, settings_outputs = build_settings_tab(ctx)

        def whoami(request: gr.Request) -> str:
            user = ctx.user_of(request)
            parts = [f"Signed in as **{escape_markdown(user)}**" if ctx.users else "Local mode (no logins)",
                     f"memories in namespace `{escape_markdown(ctx.namespace_of(request))}`"]
            if ctx.users and ctx.is_admin(request):
                parts.append("admin: every namespace is visible in Memory")
            if ctx.read_only:
                parts.append("**read-only demo**: memories can be seen and used, not changed")
            return " · ".join(parts)

        def follow_link(request: gr.Request):
            return gr.Tabs(selected="memory") if linked_memory(request) else gr.Tabs()

        demo.load(whoami, None, [who])
        demo.load(follow_link, None, [tabs])
        demo.load(load_history, None, [history])
        demo.load(load_documents, None, documents_outputs)
        documents_tab.select(load_documents, None, documents_outputs)
        demo.load(load_memory, None, memory_outputs)
        demo.load(load_learning, None, learning_outputs)
        demo.load(load_settings, None, settings_outputs)
        memory_tab.select(load_memory, None, memory_outputs)
        learning_tab.select(load_learning, None, learning_outputs)
    return demo


class PortInUseError(OSError):
    """The port to serve on is taken; the message names it and the option that picks another."""


def port_in_use(host: str, port: int) -> PortInUseError | None:
    """Whether `host:port` cannot be bound (as the server would bind it), as the error to report;
    None when it can (or when the address itself is the problem: the server then says so)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except OSError:
        return None
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is no owner
        try:
            probe.bind((host, port))
        except OSError as exc:
            other = port + 1 if port < 65535 else 7861
            if exc.errno == errno.EADDRINUSE:
                why = "is already in use: another program, or the app already running, listens there. Stop it, or"
            elif exc.errno == errno.EACCES:
                why = "cannot be opened by this user (ports below 1024 need extra rights);"
            else:
                return None
            return PortInUseError(f"Port {port} on {host} {why} start on another port with --port, "
                                  f"e.g. `python -m app --port {other}`.")
    return None


# Gradio's footer links: no "API" page (it lists the UI's internal endpoints by their function names)
# and no "Runs" page (it would keep every question and answer in the browser).
FOOTER_LINKS = ["gradio", "settings"]


def upload_cache_sweep(ctx: AppContext) -> UploadCache | None:
    """The sweep of Gradio's cache when it lies in the app's data folder (use_upload_cache); a cache
    elsewhere (the system's temporary folder, shared with others) is not the app's to sweep."""
    root = Path(get_upload_folder()).resolve()
    app_config = ctx.runtime.config.app
    if not root.is_relative_to(Path(ctx.runtime.config.data_dir).resolve()):
        return None
    return UploadCache(root, max_bytes=app_config.upload_cache_bytes, max_age_s=app_config.upload_cache_age_s,
                       files=ctx.files)


@contextmanager
def forwarded_headers_trusted_from(proxies: str) -> Iterator[None]:
    """While the server is set up: uvicorn (which Gradio starts without proxy settings) believes the
    X-Forwarded-For of the addresses in FORWARDED_ALLOW_IPS, 127.0.0.1 when unset; here, of
    app.trusted_proxies alone ("": of nobody, so a client's address is its connection's)."""
    before = os.environ.get("FORWARDED_ALLOW_IPS")
    os.environ["FORWARDED_ALLOW_IPS"] = proxies
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("FORWARDED_ALLOW_IPS", None)
        else:
            os.environ["FORWARDED_ALLOW_IPS"] = before


def launch(ctx: AppContext, *, host: str, port: int, prevent_thread_lock: bool = False):
    """Start serving; runs queue separately so one user's long run does not block another's page.
    Each user's files are served to that user alone; with logins, sign-in is throttled (the counts
    shared through the memory store's database) and password checks run off the event loop. A
    cache in the data folder is swept, and lets an upload in only when it has room for it. A port
    already taken raises PortInUseError (a sentence naming the port and --port)."""
    busy = port_in_use(host, port)
    if busy is not None:
        raise busy
    demo = build_ui(ctx)
    auth = None
    local_user = ctx.user_of(None) if ctx.users is None else None  # without logins: the one user, every visitor
    middleware = [Middleware(OwnFilesOnly, files=ctx.files, local_user=local_user)]
    sweep = upload_cache_sweep(ctx)
    if sweep is not None:  # outside OwnFilesOnly: an upload refused for room is no one's
        middleware.insert(0, Middleware(BoundedUploads, cache=sweep))
    if ctx.users is not None:
        auth = LoginGuard(ctx.users, counts=ctx.runtime.store.login_failures()).authenticate
        middleware.insert(0, Middleware(ClientAddress))
    app_kwargs = {"middleware": middleware}
    if sweep is not None:
        app_kwargs["lifespan"] = sweep.lifespan()
    demo.queue(default_concurrency_limit=8)
    app_config = ctx.runtime.config.app
    try:
        with forwarded_headers_trusted_from(app_config.trusted_proxies):
            demo.launch(
                server_name=host, server_port=port, show_error=True, auth=auth, app_kwargs=app_kwargs,
                auth_message=("Sign in with the account the demo's host gave you. After several wrong passwords, "
                              "sign-in pauses for a while.") if auth else None,
                # Uploads are question images and documents; each is checked against its own limit after.
                max_file_size=max(app_config.max_image_bytes, app_config.max_document_bytes),
                prevent_thread_lock=prevent_thread_lock, ssr_mode=False, quiet=True, footer_links=FOOTER_LINKS,
                run_history=False, theme=theme(), css=PAGE_CSS,
            )
    except OSError as exc:  # taken between the check and Gradio's own bind
        busy = port_in_use(host, port)
        if busy is not None:
            raise busy from exc
        raise
    return demo


def stop_on_sigterm() -> None:
    """SIGTERM stops the app as Ctrl-C does: the server closes and `serve` stops the learner worker it
    started (Python's default for SIGTERM ends the process at once, leaving the worker behind)."""
    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def serve(config: Config, *, host: str, port: int, users: UserDirectory | None = None, read_only: bool = False,
          config_path: str | None = None) -> None:
    """Build the runtime and serve it; a port already taken raises PortInUseError before anything loads.
    `config_path`: the TOML file the configuration came from (a started learner worker reads it too).
    SIGINT and SIGTERM end it, and with it the learner worker it started."""
    busy = port_in_use(host, port)
    if busy is not None:
        raise busy
    if threading.current_thread() is threading.main_thread():
        stop_on_sigterm()
    use_upload_cache(config.data_dir)
    print("Preparing the models, the search index and the memory store (first start takes a few minutes)...", flush=True)
    runtime = build_runtime(config, progress=True, dense_in_background=True)
    learner = None
    off_reason = ""
    try:
        if config.ttrl.enabled and read_only:
            print("Read-only demo: test-time learning stays off (ttrl.enabled is ignored).", flush=True)
        elif config.ttrl.enabled:
            try:
                learner = start_learning(runtime, config_path=config_path)
            except ConfigError as exc:
                off_reason = str(exc)
                print(f"Test-time learning is off: {off_reason}", flush=True)
        if learner is not None:
            status = learner.status()
            where = {"thread": "in this process", "process": "in its own nice'd process (python -m training ttrl worker)",
                     "external": "in the worker you run (python -m training ttrl worker)"}[config.ttrl.worker]
            print(f"Test-time learning is on, {where}: Planner v{status.current_version:04d}"
                  + (" (paused: resume it in the Learning view)" if status.paused else "") + ".", flush=True)
            for note in status.version_notes + ([status.load_problem] if status.load_problem else []):
                print(f"Learning folder: {note}.", flush=True)
        ctx = AppContext(runtime, users=users, read_only=read_only, learner=learner, learning_off_reason=off_reason)
        print(f"Serving on http://{host}:{port}", flush=True)
        launch(ctx, host=host, port=port)
    finally:
        if learner is not None:
            learner.stop(timeout=10)
        runtime.close()


def start_learning(runtime: Runtime, *, config_path: str | None = None):
    """The app's learner, where ttrl.worker puts it: a thread here, a nice'd worker process this app
    starts (and stops), or a worker someone else runs; the last two are reached through the database."""
    config = runtime.config
    if config.ttrl.worker == "thread":
        from training.ttrl.live import build_learner  # imports torch and peft: only when learning is on

        learner = build_learner(runtime)
        learner.start()
        return learner
    from training.ttrl.live import learning_root, planner_weights_source, worker_handle
    from training.ttrl.remote import other_learner, start_worker_process

    planner_weights_source(config)  # a served Planner without ttrl.base_model_dir: the ConfigError saying what to set
    process = None
    if config.ttrl.worker == "process":
        held_by = other_learner(runtime.store.learner_lease(ttl_s=config.ttrl.lease_ttl_s),
                                wait_s=min(config.ttrl.lease_ttl_s, 5.0) + 10.0)
        if held_by:
            print(held_by, flush=True)
        else:
            process = start_worker_process(nice=config.ttrl.worker_nice, config_path=config_path,
                                           log_path=learning_root(config) / "worker.log")
            print(f"Started the learner worker (pid {process.pid}; its log: {learning_root(config) / 'worker.log'}).",
                  flush=True)
    try:
        return worker_handle(runtime, process=process)
    except BaseException:
        if process is not None:
            process.stop(timeout=10)
        raise
