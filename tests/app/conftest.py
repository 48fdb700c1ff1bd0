"""Fixtures for the app's tests: a real runtime on the tiny random model, the shared search index,
a fresh memory store and run log per test."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from backend.config import LearningConfig, RoleConfig, load_config

REPO = Path(__file__).resolve().parents[2]
SHARED_INDEX_DIR = REPO / ".mia" / "test-cache" / "index"


# Test-time learning small enough for the tiny model: one signal makes a version, in seconds.
# Its Planner writes plans of steps: the random model's decompositions are never readable, so under
# sub-questions its rollouts all earn one reward and no update is made (one with no advantage is skipped).
LEARNING_AGENT = {"plan_shape": "steps"}
FAST_LEARNING = dict(enabled=True, rollouts_per_signal=2, signals_per_update=1, rollouts_per_hour=100, canary_size=1,
                     max_turns=1, max_new_tokens=16, poll_seconds=0.2, lora_r=4, lora_alpha=8)


def app_config(data_dir: Path, model_dir: Path, ttrl: dict | None = None, agent: dict | None = None):
    """The repository config with every role on `model_dir` and data under `data_dir`. Test-time learning
    is off unless `ttrl` gives its settings (e.g. FAST_LEARNING), whatever mia.toml says; `agent`
    overrides [agent] settings."""
    base = load_config(environ={})
    role = RoleConfig(backend="embedded", model_dir=str(model_dir), max_new_tokens=32)
    return replace(
        base,
        data_dir=data_dir,
        memory_url=f"sqlite:///{data_dir / 'memory.sqlite'}",
        agent=replace(base.agent, **{"max_turns": 2, "reflections": 1, **(agent or {})}),
        roles={name: role for name in base.roles},
        ttrl=LearningConfig(**(ttrl or {})),
    )


def make_runtime(config, tools, embedder):
    """build_runtime's parts, with the search index shared between tests instead of rebuilt."""
    from backend.agent import ResearchAgent
    from backend.runlog import RunLog
    from backend.runtime import Runtime, make_chat_model
    from memory_db import MemoryStore

    config.data_dir.mkdir(parents=True, exist_ok=True)
    models = {name: make_chat_model(config, name, progress=False) for name in config.roles}
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    runlog = RunLog(config.runs_dir)
    agent = ResearchAgent(config, models=models, tools=tools, store=store, runlog=runlog)
    return Runtime(config=config, agent=agent, store=store, runlog=runlog)


@pytest.fixture
def runtime(tmp_path, tiny_model_dir, shared_tools, embedder):
    rt = make_runtime(app_config(tmp_path / "data", tiny_model_dir), shared_tools, embedder)
    yield rt
    rt.close()


# -- the app in a real server, and a real browser -------------------------------------------------
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
USERS = {"alice": ("alice-pass", False), "bob": ("bob-pass", False), "carol": ("carol-pass", False),
         "admin": ("admin-pass", True)}


def login(page, url: str, user: str, password: str | None = None) -> None:
    """Sign `user` in on the page (password: theirs in USERS) and wait for the greeting."""
    page.goto(url)
    page.locator("input[type=text]").fill(user)
    page.locator("input[type=password]").fill(password if password is not None else USERS[user][0])
    page.get_by_role("button", name="Login").click()
    page.locator("#who").get_by_text(f"Signed in as {user}").wait_for()


def ask_until_final(page, question: str, timeout: float = 60_000) -> None:
    """On the Research page: ask `question` and wait until its answer is final."""
    page.locator("#question textarea, #question input").first.fill(question)
    page.locator("#ask").click()
    page.locator('#answer-box .answer-box[data-state="final"]').wait_for(timeout=timeout)


def export_memories(page, folder: Path) -> Path:
    """In the Memory view: export the namespace and save the download in `folder`."""
    page.locator("#transfer").get_by_text("Export and import").click()
    page.locator("#memory-export").click()
    link = page.locator("#export-file a").first
    link.wait_for()
    with page.expect_download() as download:
        link.click()
    exported = Path(folder) / download.value.suggested_filename
    download.value.save_as(exported)
    return exported


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_users(path: Path) -> Path:
    from app.auth import hash_password

    lines = []
    for name, (password, admin) in USERS.items():
        lines += [f"[users.{name}]", f'password = "{hash_password(password)}"', f"admin = {str(admin).lower()}", ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def serve_app(root: Path, model_dir: Path, tools, embedder, *, with_logins: bool, read_only: bool = False,
              ttrl: dict | None = None, agent: dict | None = None, models: dict | None = None):
    """Start the whole app on 127.0.0.1:<free port>; returns (url, AppContext, stop).

    With `ttrl` (settings with enabled=True), test-time learning runs in the background as `serve` runs it.
    `agent`: [agent] settings to override; `models`: ChatModels by role in place of the tiny model's."""
    from app.auth import UserDirectory
    from app.session import AppContext
    from app.ui import launch

    runtime = make_runtime(app_config(root / "data", model_dir, ttrl, agent), tools, embedder)
    runtime.agent.models.update(models or {})
    users = UserDirectory.load(write_users(root / "users.toml")) if with_logins else None
    learner = None
    if runtime.config.ttrl.enabled and not read_only:
        from training.ttrl.live import build_learner

        learner = build_learner(runtime)
        learner.start()
    ctx = AppContext(runtime, users=users, read_only=read_only, learner=learner)
    port = free_port()
    demo = launch(ctx, host="127.0.0.1", port=port, prevent_thread_lock=True)

    def stop() -> None:
        demo.close()
        if learner is not None:
            learner.stop(timeout=60)
        runtime.close()

    return f"http://127.0.0.1:{port}", ctx, stop


@pytest.fixture(scope="session")
def app_server(tmp_path_factory, tiny_model_dir, shared_tools, embedder):
    """The whole app with logins (alice, bob, carol, admin), tiny model in every role."""
    url, ctx, stop = serve_app(tmp_path_factory.mktemp("app"), tiny_model_dir, shared_tools, embedder, with_logins=True)
    yield url, ctx
    stop()


@pytest.fixture(scope="module")
def start_app(tmp_path_factory, tiny_model_dir, shared_tools, embedder):
    """start_app(**serve_app options) -> (url, AppContext): the whole app on the tiny model (or the
    `models` given), stopped after the module's tests."""
    stops = []

    def start(**options):
        url, ctx, stop = serve_app(tmp_path_factory.mktemp("app"), tiny_model_dir, shared_tools, embedder, **options)
        stops.append(stop)
        return url, ctx

    yield start
    for stop in stops:
        stop()


@pytest.fixture
def read_only_server(tmp_path, tiny_model_dir, shared_tools, embedder):
    """The read-only demo without logins."""
    url, ctx, stop = serve_app(tmp_path, tiny_model_dir, shared_tools, embedder, with_logins=False, read_only=True)
    yield url, ctx
    stop()


@pytest.fixture
def learning_runtime(tmp_path, tiny_model_dir, shared_tools, embedder):
    """A runtime (tiny model) whose config has test-time learning on, with FAST_LEARNING settings."""
    rt = make_runtime(app_config(tmp_path / "data", tiny_model_dir, FAST_LEARNING, LEARNING_AGENT), shared_tools, embedder)
    yield rt
    rt.close()


@pytest.fixture
def learning_server(tmp_path, tiny_model_dir, shared_tools, embedder):
    """The app without logins, with test-time learning running in the background (FAST_LEARNING)."""
    url, ctx, stop = serve_app(tmp_path, tiny_model_dir, shared_tools, embedder, with_logins=False,
                               ttrl=FAST_LEARNING, agent=LEARNING_AGENT)
    yield url, ctx
    stop()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def new_page(browser, request):
    """new_page() -> a page in a fresh browser context; a screenshot of each is saved if the test fails."""
    contexts = []

    def make():
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        context.set_default_timeout(30_000)
        contexts.append(context)
        return context.new_page()

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for number, context in enumerate(contexts):
        if failed:
            ARTIFACTS.mkdir(exist_ok=True)
            for page in context.pages:
                page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-{number}.png"), full_page=True)
        context.close()
