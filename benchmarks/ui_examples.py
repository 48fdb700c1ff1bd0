"""The research page's example questions asked through the web UI as a user asks them: the app
served by `python -m app serve` with the configured models (by default Qwen2.5-Coder-1.5B on
llama.cpp) on a fresh memory, driven in headless Chromium. For each question it prints the answer,
whether it is the dataset's answer, the plan as the page shows it (each sub-question with its answer
and the page stating it), the cited sources and the seconds until the answer was final, and saves
a screenshot of the page with its plan open.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/ui_examples.py --out .mia/ui-examples

The models and the search index are the app's own (its data folder's `models` and `index`, linked
into a temporary data folder), so nothing is downloaded or built and the app's memories are left
alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from app.question_inputs import EXAMPLE_QUESTIONS  # noqa: E402
from backend.answer_match import answer_contains  # noqa: E402
from backend.config import load_config  # noqa: E402
from benchmarks.login_flood_bench import free_port, wait_until_up  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
QUESTION_FILES = ("data/hotpotqa/train.jsonl", "data/hotpotqa/dev.jsonl")
# HotpotQA's own answer to an example question that is not among this repository's samples.
NOT_IN_SAMPLES = {"Which magazine was started first, Arthur's Magazine or First for Women?": "Arthur's Magazine"}


def dataset_answers() -> dict[str, str]:
    answers = dict(NOT_IN_SAMPLES)
    for name in QUESTION_FILES:
        for line in (REPO / name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                answers[" ".join(record["question"].split())] = record["answer"]
    return answers


def ask(page, question: str, timeout_s: float) -> dict:
    page.locator("#question textarea, #question input").first.fill(question)
    started = time.perf_counter()
    page.locator("#ask").click()
    final = page.locator('#answer-box .answer-box[data-state="final"]',
                         has=page.locator(".answer-question", has_text=question))  # not the last question's
    final.wait_for(timeout=timeout_s * 1000)
    seconds = time.perf_counter() - started
    page.evaluate("document.querySelectorAll('#trace details.plan').forEach(d => d.open = true)")
    plans = [text.strip() for text in page.locator("#trace details.plan").all_inner_texts()]
    answer = page.locator("#answer-box .answer-text").first.evaluate(  # without its citation marks
        "el => Array.from(el.childNodes).filter(n => n.nodeType === Node.TEXT_NODE).map(n => n.textContent).join('')")
    return {"question": question, "answer": answer.strip(),
            "sources": page.locator("#answer-box .citations").first.inner_text().strip()
            if page.locator("#answer-box .citations").count() else "",
            "plans": plans, "seconds": round(seconds, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / ".mia" / "ui-examples")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a question may take")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    app_data = load_config().data_dir
    answers = dataset_answers()
    results = []
    with tempfile.TemporaryDirectory(prefix="ui-examples-") as data_dir:
        for part in ("models", "index"):
            os.symlink(app_data / part, Path(data_dir) / part)
        port = free_port()
        env = {**os.environ, "MIA_PATHS_DATA_DIR": data_dir, "OMP_WAIT_POLICY": "PASSIVE"}
        with (args.out / "app.log").open("w") as log:
            server = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port)], cwd=REPO, env=env,
                                      stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_up(url, server, deadline_s=600)  # the models load first
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                page.goto(url)
                for number, question in enumerate(EXAMPLE_QUESTIONS, 1):
                    result = ask(page, question, args.timeout)
                    gold = answers.get(" ".join(question.split()))
                    result["gold"] = gold
                    result["right"] = bool(gold) and answer_contains(result["answer"], gold)
                    page.screenshot(path=str(args.out / f"example-{number}.png"), full_page=True)
                    results.append(result)
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=60)
    (args.out / "examples.json").write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
    print("| question | answer | dataset's answer | right | s to the final answer |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r['question']} | {r['answer']} | {r['gold'] or '-'} | {'yes' if r['right'] else 'no'} | {r['seconds']} |")
    for r in results:
        print(f"\n{r['question']}\n" + "\n".join(r["plans"]) + (f"\nSources: {r['sources']}" if r["sources"] else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
