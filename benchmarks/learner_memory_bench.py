"""Peak memory of one test-time learning step on the default model: one signal's rollouts and one
GRPO update of the Planner's LoRA, as the learner worker runs them (every role on the llama.cpp
Qwen2.5-Coder-1.5B, the trained copy dequantised from its GGUF, BM25 search).

    .venv/bin/python benchmarks/learner_memory_bench.py                    # bfloat16 (ttrl.weights_dtype)
    .venv/bin/python benchmarks/learner_memory_bench.py --dtype float32    # the old float32 copy, for comparison

Two processes, so each peak belongs to its own work: the first prepares the trained copy (once;
later runs find it under .mia/models), the second is the worker's life: the app's models, the
learner, its policy, the rollouts of one train question (ttrl.rollouts_per_signal plans) and one
GRPO update on them (the canary is left out). Each phase's peak RSS is the kernel's VmHWM, reset
before the phase (/proc/self/clear_refs). The table ends with what training.ttrl.memory_fit
estimates for the same weights, so the estimate's factor can be checked against the measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
TRAIN = REPO / "data" / "hotpotqa" / "train.jsonl"
GB = 1e9


def _kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


class Phases:
    """Seconds, peak RSS and RSS after each phase of this process."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    @contextmanager
    def phase(self, name: str):
        Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from the RSS now
        started, before = time.perf_counter(), _kib("VmRSS")
        row = {"phase": name}
        yield row
        row.update(seconds=time.perf_counter() - started, rss_before=before, peak_rss=_kib("VmHWM"),
                   rss_after=_kib("VmRSS"))
        self.rows.append(row)
        print(f"{name}: {row['seconds']:.0f} s, peak {row['peak_rss'] / GB:.2f} GB", file=sys.stderr, flush=True)


def prepare(dtype: str) -> dict:
    """The trained copy of the llama.cpp Planner's GGUF, converting it if needed."""
    from backend.config import load_config
    from backend.llm.gguf_import import read_manifest
    from backend.llm.registry import gguf_file
    from training.ttrl.live import planner_base_dir

    config = load_config()
    config = replace(config, ttrl=replace(config.ttrl, weights_dtype=dtype))
    gguf = gguf_file(config, config.role("planner"))
    phases = Phases()
    with phases.phase("prepare the trained copy") as row:
        folder = planner_base_dir(config)
        row["note"] = f"{gguf.name} -> {folder.name} ({read_manifest(folder).get('prepare_seconds', '?')} s when made)"
    return {"folder": str(folder), "rows": phases.rows}


def learn(dtype: str, folder: str, work: Path, rollouts: int) -> dict:
    import torch

    from backend.config import load_config
    from backend.eval.datasets import load_questions
    from backend.runtime import build_runtime
    from training.grpo import group_advantages, grpo_update
    from training.ttrl import Signal
    from training.ttrl.live import build_learner
    from training.ttrl.memory_fit import learner_need

    base = load_config()
    work.mkdir(parents=True, exist_ok=True)
    index = work / "index"
    if not index.exists():  # the app's search index (or the tests'), not a second build
        app_index = base.index_cache_dir if base.index_cache_dir.is_dir() else REPO / ".mia" / "test-cache" / "index"
        index.symlink_to(app_index)
    models = work / "models"
    if not models.exists():
        models.symlink_to(base.model_cache_dir)
    config = replace(base, data_dir=work, memory_url="",
                     search=replace(base.search, hybrid=False, web=False),
                     ttrl=replace(base.ttrl, enabled=True, base_model_dir=folder, weights_dtype=dtype,
                                  rollouts_per_signal=rollouts, rollouts_per_hour=1_000_000))
    question = load_questions(TRAIN, limit=1)[0]
    phases = Phases()
    with phases.phase("the app's models, index and memory (the worker's start)"):
        runtime = build_runtime(config, progress=False, with_documents=False)
        learner = build_learner(runtime, serving=False)
    with phases.phase(f"load the policy ({dtype} weights, LoRA r={config.ttrl.lora_r})"):
        policy = learner.policy()
    with phases.phase(f"{rollouts} rollouts of one signal") as row:
        outcome = learner.process(Signal(question.question, "ground_truth", "bench", question.answer, "stream:bench"))
        row["note"] = f"rewards {[round(r.reward.total, 2) for r in outcome.rollouts]}"
    group = learner.batch[-1]
    advantages = group_advantages(group.rewards, rollouts)
    forced = not any(advantages)
    if forced:  # every plan scored alike: the update is measured on the same turns with a spread made up
        advantages = [1.0 if i % 2 == 0 else -1.0 for i in range(rollouts)]
    episodes = group.episodes()
    with phases.phase("one GRPO update") as row:
        optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=config.ttrl.learning_rate, weight_decay=0.0)
        stats = grpo_update(policy.model, optimizer, list(zip(episodes, advantages)), temperature=config.ttrl.temperature)
        longest = max(len(s.prompt_ids) + len(s.completion_ids) for e in episodes for s in e)
        row["note"] = (f"{stats.tokens} sampled tokens in {sum(len(e) for e in episodes)} turns, longest "
                       f"{longest} tokens" + ("; advantages made up (all plans scored alike)" if forced else ""))
    need = learner_need(Path(folder), dtype)
    runtime.close()
    return {"rows": phases.rows, "need": {"weights": need.weights, "bytes": need.bytes, "description": need.description},
            "weights_bytes": sum(p.numel() * p.element_size() for p in policy.model.parameters())}


def child(args: list[str]) -> dict:
    """Run a phase in its own process; its last output line is its JSON result."""
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    done = subprocess.run([sys.executable, __file__, *args], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"the phase {args[1]} failed (exit code {done.returncode}); its output is above")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    lines = ["| phase | seconds | RSS before GB | peak RSS GB | RSS after GB | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['phase']} | {r['seconds']:.0f} | {r['rss_before'] / GB:.2f} | {r['peak_rss'] / GB:.2f} | "
                     f"{r['rss_after'] / GB:.2f} | {r.get('note', '')} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--rollouts", type=int, default=4, help="plans for the one signal (ttrl.rollouts_per_signal)")
    parser.add_argument("--out", type=Path, default=REPO / ".mia" / "bench" / "learner-memory")
    parser.add_argument("--phase", choices=["prepare", "learn"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "prepare":
        print(json.dumps(prepare(args.dtype)))
        return
    if args.phase == "learn":
        print(json.dumps(learn(args.dtype, args.folder, args.out / args.dtype, args.rollouts)))
        return

    load = os.getloadavg()
    started = time.perf_counter()
    prepared = child(["--phase", "prepare", "--dtype", args.dtype])
    learned = child(["--phase", "learn", "--dtype", args.dtype, "--folder", prepared["folder"],
                     "--out", str(args.out), "--rollouts", str(args.rollouts)])
    rows = prepared["rows"] + learned["rows"]
    start_rss = learned["rows"][0]["rss_after"]  # the worker with the app's models, before the policy
    learner_peak = max(r["peak_rss"] for r in learned["rows"][1:])
    measured = learner_peak - start_rss
    print(f"\nOne test-time learning step on {Path(prepared['folder']).name}, weights in {args.dtype}; "
          f"load average {load[0]:.1f} at start on {os.cpu_count()} CPUs; {time.perf_counter() - started:.0f} s in all\n")
    print(table(rows))
    print(f"\n- peak RSS of the worker: {learner_peak / GB:.2f} GB; of the conversion: {prepared['rows'][0]['peak_rss'] / GB:.2f} GB")
    print(f"- the learner's own part (peak minus the worker before the policy): {measured / GB:.2f} GB, "
          f"{measured / learned['weights_bytes']:.2f} x the policy's {learned['weights_bytes'] / GB:.2f} GB of weights")
    print(f"- training.ttrl.memory_fit estimates {learned['need']['description']}")
    (args.out / f"result-{args.dtype}.json").write_text(json.dumps({"prepare": prepared, "learn": learned}, indent=2))


if __name__ == "__main__":
    main()
