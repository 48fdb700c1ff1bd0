"""A user's question latency while the learner worker is idle and while it trains, on one machine.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/learner_interference.py [--model smollm2|qwen]
        [--questions 4] [--method mia] [--signals 24]

The app side (this process) answers `--questions` questions from `train` three times, each time in
a fresh namespace (so memory plays no part):

1. idle: the worker (`python -m training ttrl worker --nice 10`, its own process) is running with
   nothing to learn from;
2. training: the worker has `--signals` signals to learn from (rollouts, GRPO, canary) and the app
   tells it, as the web UI does, that a user's question runs; it gives way before each model call
   and each sequence of a GRPO update;
3. training, not told: the same, but the app says nothing: the worker is only nice'd.

Prints one table (latency per question, and the worker's CPU seconds during each phase). Roles:
`smollm2` puts every role (and the learner) on SmolLM2-135M; `qwen` is the default configuration
(Qwen2.5-Coder-1.5B on llama.cpp; the learner first dequantises its weights, minutes and ~6 GB).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from app.session import AppContext  # noqa: E402
from backend.agent import RunRequest  # noqa: E402
from backend.config import load_config  # noqa: E402
from backend.eval.datasets import load_questions  # noqa: E402
from backend.feedback import FeedbackQueue  # noqa: E402
from backend.runtime import build_runtime  # noqa: E402
from training.ttrl.live import learning_root, swap_planner  # noqa: E402
from training.ttrl.remote import RemoteLearner  # noqa: E402
from training.ttrl.signals import Signal  # noqa: E402

TRAIN = REPO_ROOT / "data" / "hotpotqa" / "train.jsonl"


def write_config(workdir: Path, model: str) -> Path:
    data = workdir / "data"
    data.mkdir(parents=True)
    for shared in ("models", "index"):  # the prepared models and the built wiki index, not new copies
        (REPO_ROOT / ".mia" / shared).mkdir(parents=True, exist_ok=True)
        (data / shared).symlink_to(REPO_ROOT / ".mia" / shared)
    roles = ""
    if model == "smollm2":
        roles = "".join(f'[roles.{r}]\nbackend = "embedded"\n' for r in ("planner", "executor", "manager", "judge"))
    path = workdir / "bench.toml"
    path.write_text(f'''[paths]
data_dir = "{data}"
[search]
hybrid = false
[ttrl]
enabled = true
worker = "external"
rollouts_per_signal = 2
signals_per_update = 2
rollouts_per_hour = 10000
canary_size = 1
poll_seconds = 1.0
{roles}''', encoding="utf-8")
    return path


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ask(ctx: AppContext, question: str, namespace: str, method: str, tell: bool) -> float:
    started = time.perf_counter()
    if tell:
        with ctx.question_running() as still_running:
            for _ in ctx.agent.run(RunRequest(question, namespace=namespace, method=method)):
                still_running()
    else:
        for _ in ctx.agent.run(RunRequest(question, namespace=namespace, method=method)):
            pass
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("smollm2", "qwen"), default="smollm2")
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--method", default="mia")
    parser.add_argument("--signals", type=int, default=24, help="signals queued for the training phases")
    parser.add_argument("--offset", type=int, default=200, help="first train question asked")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="mia-interference-"))
    config_path = write_config(workdir, args.model)
    config = load_config(config_path)
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; roles {args.model}; "
          f"method {args.method}; {args.questions} questions per phase; folder {workdir}", flush=True)
    runtime = build_runtime(config, progress=True)
    queue = FeedbackQueue(runtime.store)
    learner = RemoteLearner(config.ttrl, lease=runtime.store.learner_lease(ttl_s=config.ttrl.lease_ttl_s), queue=queue,
                            root=learning_root(config), on_promote=lambda version: swap_planner(runtime, version))
    ctx = AppContext(runtime, learner=learner)
    log = open(workdir / "worker.log", "wb")
    worker = subprocess.Popen([sys.executable, "-m", "training", "ttrl", "worker", "--nice", "10", "--quiet",
                               "--config", str(config_path)], cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, "MIA_CONFIG": str(config_path)})
    rows = []
    try:
        deadline = time.monotonic() + 900
        while not (learner.running and (learner.lease.read().status or {}).get("status")):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the worker did not start; see {workdir / 'worker.log'}")
            time.sleep(1)
        items = load_questions(TRAIN, limit=args.offset + args.questions + args.signals + 1)
        asked = [q.question for q in items[args.offset:args.offset + args.questions]]
        taught = items[args.offset + args.questions + 1:]
        ask(ctx, items[args.offset + args.questions].question, "warm-up", args.method, tell=True)

        def phase(name: str, namespace: str, tell: bool) -> None:
            before = cpu_seconds(worker.pid)
            waited_before = float((learner.lease.read().status or {}).get("yielded_s", 0.0))
            started = time.perf_counter()
            seconds = [ask(ctx, q, namespace, args.method, tell) for q in asked]
            wall = time.perf_counter() - started
            status = learner.lease.read().status or {}
            rows.append((name, seconds, cpu_seconds(worker.pid) - before, wall,
                         float(status.get("yielded_s", 0.0)) - waited_before, status.get("status", {}).get("activity", "")))
            print(f"  {name}: {[round(s, 1) for s in seconds]}", flush=True)

        phase("idle (nothing to learn from)", "idle", tell=True)
        for i, item in enumerate(taught):
            queue.add_signal(f"bench:{i}", namespace="bench", run_id=f"bench{i}",
                             signal=Signal(item.question, "ground_truth", "bench", item.answer, f"ground_truth:bench{i}").to_dict())
        deadline = time.monotonic() + 900
        while "rolling out" not in (learner.lease.read().status or {}).get("status", {}).get("activity", ""):
            if time.monotonic() > deadline:
                raise SystemExit("the worker did not start training")
            time.sleep(1)
        phase("training, told that a question runs", "training", tell=True)
        phase("training, not told (nice 10 only)", "untold", tell=False)
    finally:
        worker.terminate()
        worker.wait(60)
        runtime.close()
    idle = statistics.median(rows[0][1])
    print("\n| phase | p50 s | mean s | vs idle (p50) | worker CPU s | worker CPU share | worker gave way s |")
    print("|---|---|---|---|---|---|---|")
    for name, seconds, cpu, wall, yielded, _ in rows:
        p50 = statistics.median(seconds)
        print(f"| {name} | {p50:.1f} | {statistics.mean(seconds):.1f} | {100 * (p50 / idle - 1):+.0f}% | {cpu:.0f} | "
              f"{cpu / wall / (os.cpu_count() or 1):.0%} | {yielded:.0f} |")


if __name__ == "__main__":
    main()
