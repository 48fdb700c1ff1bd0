"""Several users asking at once: each question's latency through the real agent (default roles,
Executor alone or the full loop), against the same questions asked one at a time.

Usage: OMP_WAIT_POLICY=PASSIVE MIA_SEARCH_HYBRID=false .venv/bin/python benchmarks/concurrent_users.py
       [--users 4] [--method none] [--data data/hotpotqa/train.jsonl] [--offset 100]
Questions come from `train` (never dev). Prints one table; run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from backend.agent import RunRequest  # noqa: E402
from backend.config import REPO_ROOT, load_config  # noqa: E402
from backend.events import AnswerReady, RunFinished  # noqa: E402
from backend.eval.runner import open_eval_runtime  # noqa: E402


def ask(runtime, question: str, method: str, namespace: str) -> dict:
    started = time.perf_counter()
    first_answer = None
    finished = False
    for event in runtime.agent.run(RunRequest(question, namespace=namespace, method=method)):
        if isinstance(event, AnswerReady) and first_answer is None:
            first_answer = time.perf_counter() - started
        finished = finished or isinstance(event, RunFinished)
    return {"seconds": time.perf_counter() - started, "first_answer": first_answer, "finished": finished}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--method", default="none")
    parser.add_argument("--data", type=Path, default=REPO_ROOT / "data" / "hotpotqa" / "train.jsonl")
    parser.add_argument("--offset", type=int, default=100, help="first question used (train rows)")
    args = parser.parse_args()
    lines = args.data.read_text(encoding="utf-8").splitlines()[args.offset:args.offset + args.users]
    questions = [json.loads(line)["question"] for line in lines]
    if len(questions) < args.users:
        parser.error(f"{args.data} has no {args.users} questions from row {args.offset}; lower --offset.")
    scratch = tempfile.TemporaryDirectory(prefix="mia-users-")  # memories and run logs stay out of .mia
    runtime = open_eval_runtime(load_config(), Path(scratch.name), progress=False)
    try:
        ask(runtime, "Who wrote Kiss and Tell?", args.method, "bench-warmup")  # loads and warms the model
        executor = runtime.agent.models["executor"]  # the loaded model every role shares
        before = cache_stats(executor)
        alone = [ask(runtime, q, args.method, f"bench-alone-{i}") for i, q in enumerate(questions)]
        between = cache_stats(executor)
        together: list[dict | None] = [None] * len(questions)

        def user(index: int) -> None:
            together[index] = ask(runtime, questions[index], args.method, f"bench-user-{index}")

        threads = [threading.Thread(target=user, args=(i,)) for i in range(len(questions))]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        after = cache_stats(executor)
    finally:
        runtime.close()
        scratch.cleanup()
    print(f"{len(questions)} users at once, method {args.method}: wall {wall:.1f} s "
          f"(one at a time: {sum(r['seconds'] for r in alone):.1f} s in all)\n")
    print("| user | alone s | at once s | slowdown | first answer at once s |\n|---|---|---|---|---|")
    for i, (a, t) in enumerate(zip(alone, together)):
        first = f"{t['first_answer']:.1f}" if t["first_answer"] is not None else "-"
        print(f"| {i + 1} | {a['seconds']:.1f} | {t['seconds']:.1f} | {t['seconds'] / a['seconds']:.2f}x | {first} |")
    print(f"\nmedian alone {statistics.median(r['seconds'] for r in alone):.1f} s, "
          f"median at once {statistics.median(r['seconds'] for r in together):.1f} s; "
          f"all finished: {all(r['finished'] for r in alone + together)}")
    if before is not None:
        for label, start, end in (("one at a time", before, between), ("at once", between, after)):
            read = end["prompt_tokens"] - start["prompt_tokens"]
            cached = end["cached_tokens"] - start["cached_tokens"]
            print(f"prompt tokens {label}: {read:,}, {cached:,} of them from the cache ({cached / max(read, 1):.0%})")


def cache_stats(model) -> dict[str, int] | None:
    """A llama.cpp model's prompt-cache counters; None for a backend that keeps none."""
    stats = getattr(model, "cache_stats", None)
    return stats() if stats else None


if __name__ == "__main__":
    main()
