"""llama.cpp backend speed on the default model: load, prompt and generation tokens/s, what the
prefix cache saves on an Executor's next turn, choose() latency, several users at once, RSS.

Usage: OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/llamacpp_bench.py [--threads 2] [--slots 2]
       [--model-file FILE]  (default: Qwen2.5-Coder-1.5B-Instruct, assembled into .mia/models)
Prints one table; run it on an otherwise idle machine for comparable numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from backend.config import REPO_ROOT  # noqa: E402
from backend.llm.llamacpp import LlamaCppChatModel  # noqa: E402
from backend.llm.model_parts import assemble_qwen_gguf  # noqa: E402

PASSAGE = ("Arthur's Magazine (1844–1846) was an American literary periodical published in Philadelphia in "
           "the 19th century. Edited by Timothy Shay Arthur, it featured work by Edgar A. Poe, J.H. Ingraham, "
           "Sarah Josepha Hale, Thomas G. Spear, and others. In May 1846 it was merged into Godey's Lady's Book. ")


def conversation(turns: int) -> list[dict]:
    messages = [{"role": "system", "content": "You answer questions by research."},
                {"role": "user", "content": "Question: Which magazine was started first, Arthur's Magazine or "
                                            "First for Women?\nResearch it, then answer."}]
    for turn in range(turns):
        messages += [{"role": "assistant", "content": f"<think>step {turn}</think><tool_call>search</tool_call>"},
                     {"role": "user", "content": f"<tool_response>{PASSAGE * 2}</tool_response>"}]
    return messages


def rss_mib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0, help="0 = every core")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--model-file", type=Path)
    args = parser.parse_args()

    path = args.model_file or assemble_qwen_gguf(REPO_ROOT / ".mia" / "models")
    rows: list[tuple[str, str]] = []
    started = time.perf_counter()
    model = LlamaCppChatModel(path, threads=args.threads, slots=args.slots)
    rows.append(("model", f"{model.name} ({model.parameters / 1e9:.2f} B parameters), {model.threads} threads, "
                          f"{args.slots} slots"))
    rows.append(("load", f"{time.perf_counter() - started:.2f} s, RSS {rss_mib():.0f} MiB"))

    cold = conversation(3)
    model.generate([{"role": "user", "content": "warm-up"}], max_new_tokens=1)
    started = time.perf_counter()
    first = model.generate(cold, max_new_tokens=1)
    prompt_seconds = time.perf_counter() - started
    rows.append(("prompt processing (cold)", f"{first.prompt_tokens} tokens in {prompt_seconds:.2f} s = "
                                              f"{first.prompt_tokens / prompt_seconds:.1f} tok/s"))

    speeds = []
    for _ in range(3):
        completion = model.generate([{"role": "user", "content": "Write a short paragraph about rivers."}],
                                    max_new_tokens=args.tokens)
        speeds.append(completion.completion_tokens / completion.seconds)
    rows.append(("generation (short prompt, cached)", f"{statistics.median(speeds):.1f} tok/s (median of 3)"))

    # The next Executor turn: the same conversation plus one assistant turn and one tool response.
    before = model.cache_stats()
    started = time.perf_counter()
    follow = model.generate(conversation(4), max_new_tokens=1)
    warm_seconds = time.perf_counter() - started
    after = model.cache_stats()
    saved = after["cached_tokens"] - before["cached_tokens"]
    rows.append(("next turn, prefix cached", f"{follow.prompt_tokens} prompt tokens, {saved} from the cache, "
                                             f"{warm_seconds:.2f} s"))
    fresh = LlamaCppChatModel(path, threads=args.threads, slots=1)
    started = time.perf_counter()
    fresh.generate(conversation(4), max_new_tokens=1)
    rows.append(("same turn, no cache", f"{time.perf_counter() - started:.2f} s"))
    del fresh

    started = time.perf_counter()
    for _ in range(5):
        model.choose(conversation(4), ["search", "answer"], prefill="Next action:")
    rows.append(("choose between 2 labels (prompt cached)", f"{(time.perf_counter() - started) / 5 * 1000:.0f} ms"))

    question = [{"role": "user", "content": "Write a short paragraph about rivers."}]
    single = model.generate(question, max_new_tokens=args.tokens).seconds
    for users in (2, 4):
        seconds: list[float] = []

        def ask(index: int) -> None:
            messages = [{"role": "user", "content": f"Write a short paragraph about river number {index}."}]
            seconds.append(model.generate(messages, max_new_tokens=args.tokens).seconds)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(users)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rows.append((f"{users} users at once, {args.tokens} tokens each",
                     f"wall {time.perf_counter() - started:.1f} s; per user {min(seconds):.1f}-{max(seconds):.1f} s "
                     f"(one user alone: {single:.1f} s)"))
    rows.append(("RSS after the runs", f"{rss_mib():.0f} MiB"))

    width = max(len(name) for name, _ in rows)
    print(f"| {'measure'.ljust(width)} | value |\n|{'-' * (width + 2)}|-------|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")


if __name__ == "__main__":
    main()
