"""Screenshots of each view after a real run on the embedded SmolLM2, saved to docs/screenshots/.

    .venv/bin/python tests/app/make_screenshots.py [--out docs/screenshots]
    .venv/bin/python tests/app/make_screenshots.py --learning-from .mia/ttrl-bench/app   # the Learning view only

With --learning-from, the app is opened on the data folder of a real test-time-learning run (the
one `benchmarks/ttrl_bench.py` leaves in <out>/app): its learner runs with nothing pending, so the
view shows that run's versions, rewards and canary results without changing them.

Runs the app locally (no logins) on a fresh memory store in a temporary folder, with the prepared
SmolLM2 and search index from the test cache, and drives headless Chromium through each view.
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

from conftest import CHROMIUM_ARGS, REPO, SHARED_INDEX_DIR, free_port, make_runtime  # noqa: E402

SCROLL_TRACE_TO_TOP = """() => {
  for (const el of document.querySelectorAll('#trace *')) {
    if (el.scrollHeight > el.clientHeight + 10) el.scrollTop = 0;
  }
}"""
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
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
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
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.learning_from:
        learning_screenshot(args.learning_from.resolve(), out)
        return

    from playwright.sync_api import sync_playwright

    from app.session import AppContext
    from app.ui import launch

    runtime = smollm2_runtime(Path(tempfile.mkdtemp(prefix="mia-screens-")))
    port = free_port()
    demo = launch(AppContext(runtime), host="127.0.0.1", port=port, prevent_thread_lock=True)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"http://127.0.0.1:{port}/")
            for _ in range(2):  # the second run retrieves the first one's memory
                page.locator("#question textarea").fill(QUESTION)
                page.locator("#ground-truth input, #ground-truth textarea").first.fill("Arthur's Magazine")
                started = time.perf_counter()
                page.locator("#ask").click()
                summary = page.locator("#trace").get_by_text("📊 Run summary")
                summary.wait_for(state="detached", timeout=60_000)
                summary.wait_for(timeout=600_000)
                print(f"run took {time.perf_counter() - started:.0f} s", flush=True)
            page.screenshot(path=str(out / "research-answer.png"), full_page=True)
            trace = page.locator("#trace")
            for title in ("🧠 Memories", "🗺️ Plan", "🔧 search"):
                entry = trace.get_by_text(title).filter(visible=True).first
                if entry.count():
                    entry.click()
            page.evaluate(SCROLL_TRACE_TO_TOP)
            page.screenshot(path=str(out / "research-plan.png"), full_page=True)

            page.locator("#thumbs-up").click()
            page.locator("#feedback-result").get_by_text("Queued for test-time learning").wait_for()
            page.locator("#feedback").screenshot(path=str(out / "feedback.png"))

            page.get_by_role("tab", name="Memory").click()
            page.locator("#memory-count").get_by_text("memories in namespace").wait_for()
            page.locator("#memory-table").get_by_text(QUESTION).filter(visible=True).first.click()
            page.locator("#memory-detail-text").get_by_text("Win rate").wait_for()
            page.screenshot(path=str(out / "memory.png"), full_page=True)

            page.get_by_role("tab", name="Learning").click()
            page.locator("#queue-length").get_by_text("feedback items").wait_for()
            page.screenshot(path=str(out / "learning.png"), full_page=True)

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
