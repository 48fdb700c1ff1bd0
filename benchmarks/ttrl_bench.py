"""Test-time learning benchmark on this machine: learn from a stream of `train` questions in the
background while the app keeps answering, then evaluate the first and the last Planner version
with the evaluation harness on the same `dev` questions.

    .venv/bin/python benchmarks/ttrl_bench.py --signals 12 --dev-limit 10          # about 1-2 hours on 2 cores
    .venv/bin/python benchmarks/ttrl_bench.py --signals 100 --dev-limit 50         # the full measurement (about 12 hours here)

Phase 1 (one process, the app's real runtime on the configured roles, by default Qwen2.5-Coder-1.5B
on llama.cpp, with BM25 search and 2 Executor turns): the learner's background
worker processes the signals (n plans each, GRPO update every `signals_per_update`, canary) while
this script asks probe questions through the agent, as a user would; each probe's latency is
labelled with what the learner was doing meanwhile. Phase 2: `python -m backend.eval` with the
Planner at version 0 (base) and at the last promoted version (`--planner-version`, on the backend the
Planner runs on).
Everything lands in --out: the learner's folder (versions, logs), probes.jsonl, eval folders, report.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DEV = REPO / "data" / "hotpotqa" / "dev.jsonl"
TRAIN = REPO / "data" / "hotpotqa" / "train.jsonl"
PROBE_OFFSET = 100  # probe questions come from dev after the evaluated ones


class ActivityMonitor:
    """Samples the learner's activity while one probe question runs."""

    def __init__(self, learner) -> None:
        self.learner, self.seen = learner, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            activity = self.learner.activity
            self.seen.add("update or canary" if activity.startswith(("updating", "canary")) else
                          "rollouts" if activity.startswith("rolling") else "idle")
            self._stop.wait(0.25)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def label(self) -> str:
        if "update or canary" in self.seen:
            return "update or canary"
        return "rollouts" if "rollouts" in self.seen else "idle"


def ask(agent, question: str) -> float:
    from backend.agent import RunRequest
    from backend.events import RunFailed

    started = time.perf_counter()
    for event in agent.run(RunRequest(question, namespace="probe")):
        if isinstance(event, RunFailed):
            raise RuntimeError(event.message)
    return time.perf_counter() - started


def learn(args, out: Path) -> dict:
    from backend.config import load_config
    from backend.eval.datasets import load_questions
    from backend.runtime import build_runtime
    from training.ttrl.live import build_learner, planner_base_dir, planner_weights_source
    from training.ttrl.stream import submit_new

    config = load_config()
    # A llama.cpp Planner trains on a transformers copy of its GGUF: dequantised once into the app's
    # own model folder (about 7 GB, minutes here) and shared with the app, not redone per run folder.
    base_model_dir = config.ttrl.base_model_dir or (
        str(planner_base_dir(config)) if planner_weights_source(config).is_file() else "")
    config = replace(config, data_dir=out / "app", memory_url="",
                     ttrl=replace(config.ttrl, enabled=True, base_model_dir=base_model_dir,
                                  signals_per_update=args.signals_per_update,
                                  rollouts_per_signal=args.rollouts, rollouts_per_hour=100_000, poll_seconds=1.0))
    runtime = build_runtime(config, progress=False)
    learner = build_learner(runtime)
    probes = load_questions(DEV)[PROBE_OFFSET:PROBE_OFFSET + 200]
    probe_log = out / "probes.jsonl"
    rows = [json.loads(line) for line in probe_log.read_text().splitlines() if line] if probe_log.exists() else []
    cursor = len(rows)  # a resumed run asks the next probe questions
    with probe_log.open("a", encoding="utf-8") as log:
        def probe(phase: str) -> None:
            nonlocal cursor
            question = probes[cursor % len(probes)].question
            cursor += 1
            with ActivityMonitor(learner) as monitor:
                seconds = ask(runtime.agent, question)
            row = {"phase": phase, "during": monitor.label if phase == "learning" else "idle", "seconds": seconds,
                   "planner": runtime.agent.models["planner"].name, "at": time.time()}
            rows.append(row)
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(f"probe {len(rows)}: {row['seconds']:.1f}s during {row['during']}", flush=True)

        for _ in range(args.baseline_probes - sum(r["phase"] == "baseline" for r in rows)):
            probe("baseline")
        submit_new(learner, load_questions(TRAIN, limit=args.signals), namespace="ttrl-stream")  # resumable
        started = time.perf_counter()
        learner.start()
        while True:
            status = learner.status()
            if status.pending == 0 and status.activity in ("idle",) and status.batch < status.signals_per_update:
                break
            probe("learning")
            time.sleep(args.probe_gap)
        learn_seconds = time.perf_counter() - started
        learner.stop(timeout=600)
    runtime.close()
    return {"learn_seconds": learn_seconds, "probes": rows, "root": str(learner.root)}


def evaluate(args, out: Path, version) -> Path:
    """The evaluation of one Planner version (the base: v0000, which has no adapter); the Planner writes
    every plan, also while memory is sparse, so that the version under test is what is measured."""
    target = out / f"eval-{version.name}"
    env = {**os.environ, "MIA_AGENT_SPARSE_MEMORY_PLANNER": "planner"}
    planner = ["--planner-version", str(version.adapter_path.parent)] if version.adapter_path is not None else []
    subprocess.run([sys.executable, "-m", "backend.eval", "--data", str(DEV), "--method", "mia",
                    "--limit", str(args.dev_limit), "--out", str(target), "--no-progress",
                    "--label", f"mia, Planner {version.name}", *planner], check=True, cwd=REPO, env=env)
    return target


def latency_table(rows: list[dict]) -> str:
    lines = ["| while the learner was | probes | p50 s | max s |", "|---|---|---|---|"]
    for during in ("idle", "rollouts", "update or canary"):
        values = [r["seconds"] for r in rows if r["during"] == during]
        if values:
            lines.append(f"| {during} | {len(values)} | {statistics.median(values):.1f} | {max(values):.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--signals", type=int, default=12, help="train questions streamed through learning")
    parser.add_argument("--signals-per-update", type=int, default=4)
    parser.add_argument("--rollouts", type=int, default=4, help="plans per question (n)")
    parser.add_argument("--dev-limit", type=int, default=10, help="dev questions per evaluated version")
    parser.add_argument("--baseline-probes", type=int, default=2)
    parser.add_argument("--probe-gap", type=float, default=30.0, help="seconds between probe questions while learning")
    parser.add_argument("--out", type=Path, default=REPO / ".mia" / "ttrl-bench")
    parser.add_argument("--skip-learning", action="store_true", help="only (re)run the evaluations")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MIA_AGENT_MAX_TURNS", "2")
    os.environ.setdefault("MIA_SEARCH_HYBRID", "false")

    from training.ttrl.stream import versions_table
    from training.ttrl.version_folder import PROMOTED
    from training.ttrl.versions import VersionStore

    if not args.skip_learning:
        result = learn(args, out)
        print(f"learning took {result['learn_seconds']:.0f} s")
    probes = [json.loads(line) for line in (out / "probes.jsonl").read_text().splitlines() if line]
    store = VersionStore(out / "app" / "ttrl")
    versions = store.all()
    last = [v for v in versions if v.status == PROMOTED][-1]
    first_dir = evaluate(args, out, store.get(0))
    last_dir = evaluate(args, out, last) if last.number else None
    folders = [str(first_dir)] + ([str(last_dir)] if last_dir else [])
    subprocess.run([sys.executable, "-m", "backend.eval", "--compare", *folders, "--limit", str(args.dev_limit),
                    "--out", str(out / "report")], check=True, cwd=REPO)
    report = "\n\n".join([
        "## Planner versions", versions_table(versions, store.current().number),
        "## Latency of questions asked meanwhile", latency_table(probes),
        f"## Evaluation (mia, first {args.dev_limit} dev questions, cold memory)",
        (out / "report" / "compare.md").read_text(encoding="utf-8"),
    ])
    (out / "report.md").write_text(report + "\n", encoding="utf-8")
    print(report)


if __name__ == "__main__":
    main()
