"""The default model on the two engines that can run it here: llama.cpp (the Q4_K_M GGUF as is) and
transformers (the GGUF dequantised to a float32 folder, as test-time learning trains it). Same
prompts as benchmarks/llamacpp_bench.py: load, prompt processing, generation, RSS.

Usage: OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/engine_compare.py [--threads 2]
Each engine runs in its own process (RSS is per engine). The first run prepares the transformers
folder under .mia/models (minutes, ~6 GB). Prints one table; run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from backend.config import REPO_ROOT  # noqa: E402
from benchmarks.llamacpp_bench import conversation, rss_mib  # noqa: E402

QUESTION = [{"role": "user", "content": "Write a short paragraph about rivers."}]


def measure(engine: str, threads: int, tokens: int) -> dict:
    from backend.llm.model_parts import assemble_qwen_gguf

    gguf = assemble_qwen_gguf(REPO_ROOT / ".mia" / "models", progress=False)
    if engine == "transformers":
        import torch

        from backend.llm.embedded import EmbeddedChatModel, prepare_embedded_model

        torch.set_num_threads(threads)
        started = time.perf_counter()
        folder = prepare_embedded_model(REPO_ROOT / ".mia" / "models", gguf_path=gguf, progress=False)
        prepare_seconds = time.perf_counter() - started
        started = time.perf_counter()
        model = EmbeddedChatModel(folder)
    else:
        from backend.llm.llamacpp import LlamaCppChatModel

        prepare_seconds = 0.0
        started = time.perf_counter()
        model = LlamaCppChatModel(gguf, threads=threads, slots=1)
    load_seconds = time.perf_counter() - started
    model.generate([{"role": "user", "content": "warm-up"}], max_new_tokens=1)
    started = time.perf_counter()
    first = model.generate(conversation(3), max_new_tokens=1)
    prompt_seconds = time.perf_counter() - started
    speeds = []
    for _ in range(3):
        completion = model.generate(QUESTION, max_new_tokens=tokens)
        speeds.append(completion.completion_tokens / completion.seconds)
    return {"engine": engine, "prepare_s": prepare_seconds, "load_s": load_seconds,
            "prompt_tok_s": first.prompt_tokens / prompt_seconds, "prompt_tokens": first.prompt_tokens,
            "generation_tok_s": statistics.median(speeds), "rss_mib": rss_mib()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--engine", choices=["llamacpp", "transformers"], help="measure one engine (internal)")
    args = parser.parse_args()
    if args.engine:
        print(json.dumps(measure(args.engine, args.threads, args.tokens)))
        return
    results = []
    for engine in ("llamacpp", "transformers"):
        output = subprocess.run([sys.executable, __file__, "--engine", engine, "--threads", str(args.threads),
                                 "--tokens", str(args.tokens)], check=True, capture_output=True, text=True).stdout
        results.append(json.loads(output.strip().splitlines()[-1]))
    print("| engine | first preparation | load | prompt processing | generation | RSS |\n|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['engine']} | {r['prepare_s']:.0f} s | {r['load_s']:.1f} s | {r['prompt_tok_s']:.1f} tok/s "
              f"({r['prompt_tokens']} tokens) | {r['generation_tok_s']:.1f} tok/s | {r['rss_mib'] / 1024:.1f} GiB |")


if __name__ == "__main__":
    main()
