"""Embedded LLM speed: GGUF preparation vs cached load, generation tokens/s, choose() latency, peak RSS.

Usage: .venv/bin/python benchmarks/llm_bench.py [--tokens 64] [--repeats 5] [--threads N] [--cache-dir DIR]

Without --cache-dir a fresh temporary folder is used, so the first prepare is a cold GGUF conversion.
Also measures the same model served over HTTP (backend.llm.serve) through the OpenAI backend.
Set OMP_WAIT_POLICY=PASSIVE when other processes share the cores (torch's spinning threads slow down).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from backend.llm.embedded import EmbeddedChatModel, prepare_embedded_model  # noqa: E402
from backend.llm.openai_compat import OpenAIChatModel  # noqa: E402
from backend.llm.serve import start_server_in_thread  # noqa: E402

QUESTION = [
    {"role": "system", "content": "You are a research assistant. Answer in full sentences."},
    {"role": "user", "content": "Explain why the sky is blue, then name the scientist who described it."},
]
VERDICT = [{"role": "user", "content": "Question: Who wrote Hamlet?\nAnswer: Shakespeare.\nIs the answer correct?"}]
LABELS = ["correct", "incorrect", "unsure"]


def timed(job):
    started = time.perf_counter()
    result = job()
    return result, time.perf_counter() - started


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def current_rss_mib() -> float:
    resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per generation")
    parser.add_argument("--repeats", type=int, default=5, help="runs per timing (the median is shown)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--cache-dir", type=Path, help="prepared-model cache (default: a fresh temp dir)")
    args = parser.parse_args()

    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="llm-bench-") as scratch:
        cache = args.cache_dir or Path(scratch)
        model_dir, first = timed(lambda: prepare_embedded_model(cache, progress=False))
        rows.append(("prepare GGUF -> safetensors (first use)" if args.cache_dir is None
                     else "prepare (given cache dir)", f"{first:.2f} s"))
        _, again = timed(lambda: prepare_embedded_model(cache, progress=False))
        rows.append(("prepare again (cached folder)", f"{again * 1000:.1f} ms"))
        model, load = timed(lambda: EmbeddedChatModel(model_dir, threads=args.threads))
        rows.append(("load cached folder (EmbeddedChatModel)", f"{load:.2f} s"))
        rows.append(("peak RSS during first prepare + load", f"{peak_rss_mib():.0f} MiB"))
        rows.append(("RSS now (model loaded)", f"{current_rss_mib():.0f} MiB"))

        model.generate(QUESTION, max_new_tokens=4)  # warm-up
        runs = [model.generate(QUESTION, max_new_tokens=args.tokens) for _ in range(args.repeats)]
        speeds = [run.completion_tokens / run.seconds for run in runs]
        rows.append((f"generate tokens/s (prompt {runs[0].prompt_tokens} tok, {args.tokens} new)",
                     f"{statistics.median(speeds):.1f} (min {min(speeds):.1f}, max {max(speeds):.1f})"))
        first_delta = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            stream = model.stream(QUESTION, max_new_tokens=args.tokens)
            next(stream)
            first_delta.append(time.perf_counter() - started)
            stream.close()
        rows.append(("stream: time to first text", f"{statistics.median(first_delta) * 1000:.0f} ms"))
        latencies = [timed(lambda: model.choose(VERDICT, LABELS))[1] for _ in range(args.repeats)]
        choice = model.choose(VERDICT, LABELS)
        rows.append((f"choose() over 3 labels (picked '{choice.label}')",
                     f"{statistics.median(latencies) * 1000:.0f} ms median"))

        base_url, stop = start_server_in_thread(model)
        try:
            client = OpenAIChatModel(base_url, model.name.split(":", 1)[1])
            remote = [client.generate(QUESTION, max_new_tokens=args.tokens) for _ in range(args.repeats)]
            rows.append(("same over HTTP (serve + OpenAI backend) tokens/s",
                         f"{statistics.median(r.completion_tokens / r.seconds for r in remote):.1f}"))
            remote_choice = [timed(lambda: client.choose(VERDICT, LABELS))[1] for _ in range(args.repeats)]
            rows.append(("choose() over HTTP (guided)", f"{statistics.median(remote_choice) * 1000:.0f} ms median"))
        finally:
            stop()
        rows.append(("peak RSS (whole run)", f"{peak_rss_mib():.0f} MiB"))

    import torch

    print(f"\nSmolLM2-135M-Instruct, fp32, torch threads={torch.get_num_threads()}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, cpus={os.cpu_count()}\n")
    width = max(len(name) for name, _ in rows)
    print(f"| {'measurement'.ljust(width)} | value |")
    print(f"|{'-' * (width + 2)}|-------|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")


if __name__ == "__main__":
    main()
