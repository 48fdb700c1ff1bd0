"""Screenshots of each view after real runs on the app's configured models (by default
Qwen2.5-Coder-1.5B on llama.cpp; `--small`: the embedded SmolLM2 of the tests, faster and mostly
wrong), saved to docs/screenshots/, at 1280×800 (the research page as the viewport shows it; the
other views whole):

    research-working.png  a run under way: the answer box marked working…, with its rough time left
    research-answer.png   the final answer first, one of its sources opened
    research-trace.png    the trace below it, the plan and a step opened
    feedback.png, memory.png, memory-import.png (an export imported back: skip or replace),
    settings.png; learning.png only with --learning-from (below)

    .venv/bin/python tests/app/make_screenshots.py [--out docs/screenshots] [--small]
    .venv/bin/python tests/app/make_screenshots.py --learning-from .mia/ttrl-bench/app   # the Learning view only

With --learning-from, the app is opened on the data folder of a real test-time-learning run (the
one `benchmarks/ttrl_bench.py` leaves in <out>/app): its learner runs with nothing pending, so the
view shows that run's versions, rewards and canary results without changing them.

Runs the app locally (no logins) on a fresh memory store in a temporary folder, with the models
and search index of the app's data folder (`make prepare`; SmolLM2's from the test cache with
`--small`), and drives headless Chromium through each view. The trace's icons need an emoji font
(Debian's `fonts-noto-color-emoji`).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]

from conftest import CHROMIUM_ARGS, REPO, SHARED_INDEX_DIR, export_memories, free_port, make_runtime  # noqa: E402

VIEWPORT = {"width": 1280, "height": 800}
QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def smollm2_runtime(data_dir: Path):
    from backend.config import load_config
    from backend.llm.embedded import prepare_embedded_model
    from backend.tools import build_tools
    from memory_db import get_embedder

    model_dir = prepare_embedded_model(REPO / ".mia" / "test-cache" / "models", progress=True)
    base = load_config(environ={})
    roles = {name: replace(role, backend="embedded", model_dir=str(model_dir)) for name, role in base.roles.items()}
    config = replace(base, data_dir=data_dir, memory_url=f"sqlite:///{data_dir / 'memory.sqlite'}", roles=roles,
                     agent=replace(base.agent, max_turns=4))
    tools = build_tools(cache_dir=SHARED_INDEX_DIR, web_enabled=False, progress=True)
    return make_runtime(config, tools, get_embedder())


def configured_runtime(data_dir: Path):
    """The app's configured models and search index, linked from its data folder (nothing is
    downloaded or built), answering into a fresh memory store; no learner."""
    from backend.config import load_config
    from backend.runtime import build_runtime

    base = load_config()
    for part in ("models", "index"):
        (data_dir / part).symlink_to(base.data_dir.resolve() / part)
    config = replace(base, data_dir=data_dir, memory_url=f"sqlite:///{data_dir / 'memory.sqlite'}",
                     ttrl=replace(base.ttrl, enabled=False))
    return build_runtime(config, progress=True)


def learning_screenshot(data_dir: Path, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    from app.session import AppContext
    from app.ui import launch
    from training.ttrl.live import build_learner

    runtime = smollm2_runtime(data_dir)
    learner = build_learner(runtime)
    learner.start()
    port = free_port()
    demo = launch(AppContext(runtime, learner=learner), host="127.0.0.1", port=port, prevent_thread_lock=True)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(f"http://127.0.0.1:{port}/")
            page.get_by_role("tab", name="Learning").click()
            page.locator("#queue-length").get_by_text("feedback items").wait_for(timeout=60_000)
            page.screenshot(path=str(out / "learning.png"), full_page=True)
            browser.close()
    finally:
        demo.close()
        learner.stop(timeout=30)
        runtime.close()
    print(f"Saved {out / 'learning.png'}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(REPO / "docs" / "screenshots"))
    parser.add_argument("--learning-from", type=Path, help="a test-time-learning run's data folder: Learning view only")
    parser.add_argument("--small", action="store_true", help="answer with the embedded SmolLM2 of the tests")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.learning_from:
        learning_screenshot(args.learning_from.resolve(), out)
        return

    from playwright.sync_api import sync_playwright

    from app.session import AppContext
    from app.ui import launch

    data_dir = Path(tempfile.mkdtemp(prefix="mia-screens-"))
    runtime = smollm2_runtime(data_dir) if args.small else configured_runtime(data_dir)
    port = free_port()
    demo = launch(AppContext(runtime), host="127.0.0.1", port=port, prevent_thread_lock=True)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=VIEWPORT, accept_downloads=True)
            page.set_default_timeout(60_000)
            page.goto(f"http://127.0.0.1:{port}/")
            box = page.locator("#answer-box")
            for run in range(2):  # the second run retrieves the first one's memory
                page.locator("#question textarea, #question input").first.fill(QUESTION)
                page.locator("#ground-truth input, #ground-truth textarea").first.fill("Arthur's Magazine")
                started = time.perf_counter()
                page.locator("#ask").click()
                box.locator('[data-state="working"]').wait_for()
                if run == 1:
                    page.locator("#trace").get_by_text("Step 1").wait_for(timeout=600_000)
                    page.screenshot(path=str(out / "research-working.png"))
                box.locator('[data-state="final"]').wait_for(timeout=900_000)
                print(f"run took {time.perf_counter() - started:.0f} s", flush=True)
            marks = box.locator("button.cite")
            if marks.count():
                marks.first.click()
            # The question's box above, the answer with its opened source below (the image drop zone
            # between them takes most of the first screen).
            box.evaluate("el => window.scrollTo(0, Math.max(0, el.getBoundingClientRect().top + window.scrollY - 440))")
            page.screenshot(path=str(out / "research-answer.png"))
            for entry in ("details.plan", "details.step"):
                page.locator(f"#trace {entry} summary").first.click()
            page.locator("#trace").evaluate("el => { el.scrollIntoView({block: 'start'}); window.scrollBy(0, -50); }")
            page.screenshot(path=str(out / "research-trace.png"))

            page.locator("#thumbs-up").click()
            page.locator("#feedback-result").get_by_text("Queued for test-time learning").wait_for()
            page.locator("#feedback").screenshot(path=str(out / "feedback.png"))

            page.get_by_role("tab", name="Memory").click()
            page.locator("#memory-count").get_by_text("memories in namespace").wait_for()
            page.locator("#memory-table").get_by_text(QUESTION).filter(visible=True).first.click()
            page.locator("#memory-detail-text").get_by_text("Win rate").wait_for()
            page.screenshot(path=str(out / "memory.png"), full_page=True)

            exported = export_memories(page, Path(tempfile.mkdtemp(prefix="mia-export-")))
            page.locator("#import-file input[type=file]").set_input_files(exported)
            page.locator("#import-preview-text").get_by_text("already here").wait_for()
            page.locator("#transfer").screenshot(path=str(out / "memory-import.png"))

            page.get_by_role("tab", name="Settings").click()
            page.locator("#settings-test").click()
            page.locator("#settings-result").get_by_text("answered in").wait_for()
            page.screenshot(path=str(out / "settings.png"), full_page=True)
            browser.close()
    finally:
        demo.close()
        runtime.close()
    print(f"Screenshots saved in {out}")


if __name__ == "__main__":
    main()
