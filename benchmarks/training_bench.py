"""Training benchmark: speed and peak memory of the CPU smoke configs, and a small learning signal.

    .venv/bin/python benchmarks/training_bench.py                 # everything (about 15-30 minutes)
    .venv/bin/python benchmarks/training_bench.py --only speed    # the smoke configs only
    .venv/bin/python benchmarks/training_bench.py --only learning --learning-steps 6

Each measurement runs in its own process so peak memory (max RSS) belongs to that run alone.
"Learning" evaluates the SmolLM2 Executor on train questions (sampled rollouts, the training
temperature), trains it for a few GRPO steps on the same questions, and evaluates again.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
CONFIGS = REPO / "training" / "configs"
SPEED_CONFIGS = [
    ("executor", "executor_tiny_cpu.yaml"),
    ("planner", "planner_tiny_cpu.yaml"),
    ("executor", "executor_smollm2_cpu.yaml"),
    ("planner", "planner_smollm2_cpu.yaml"),
]


def _speed(stage: str, config: str, out: str, steps: int) -> dict:
    from training.grpo_config import load_settings
    from training.trainer import peak_rss_mb, train_stage

    settings = load_settings(CONFIGS / config, output_dir=out, steps=steps or None)
    started = time.perf_counter()
    result = train_stage(stage, settings)
    seconds = sum(step.seconds for step in result.steps)
    return {
        "config": config, "stage": stage, "steps": len(result.steps),
        "episodes_per_step": settings.questions_per_step * settings.rollouts_per_question,
        "steps_per_s": len(result.steps) / seconds, "s_per_step": seconds / len(result.steps),
        "wall_s": time.perf_counter() - started, "peak_rss_mb": peak_rss_mb(),
        "mean_reward": [round(step.mean_reward, 3) for step in result.steps],
    }


def _learning(steps: int, questions: int, eval_rollouts: int, max_new_tokens: int, out: str) -> dict:
    import torch

    from training.grpo_config import load_settings
    from training.trainer import StageTrainer, peak_rss_mb

    settings = load_settings(CONFIGS / "executor_smollm2_cpu.yaml", output_dir=out)
    settings.steps, settings.num_questions, settings.questions_per_step = steps, questions, 1
    # Kept short so a run fits a busy 2-core machine: one Executor turn, no reflection.
    settings.max_turns, settings.reflections, settings.executor_max_new_tokens = 1, 0, max_new_tokens
    trainer = StageTrainer("executor", settings)
    torch.manual_seed(123)
    before = trainer.evaluate(trainer.records, rollouts=eval_rollouts)
    started = time.perf_counter()
    logs = trainer.train(log_path=Path(out) / "log.jsonl")
    train_seconds = time.perf_counter() - started
    torch.manual_seed(123)
    after = trainer.evaluate(trainer.records, rollouts=eval_rollouts)
    return {
        "questions": questions, "eval_rollouts": eval_rollouts, "steps": steps, "max_new_tokens": max_new_tokens,
        "reward_before": before, "reward_after": after, "train_s": train_seconds,
        "step_rewards": [round(log.mean_reward, 3) for log in logs], "peak_rss_mb": peak_rss_mb(),
    }


def _child(args: list[str]) -> dict:
    completed = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, cwd=REPO)
    if completed.returncode != 0:
        raise RuntimeError(f"benchmark child {args} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("speed", "learning"))
    parser.add_argument("--configs", nargs="*", help="speed run: only these config files")
    parser.add_argument("--learning-steps", type=int, default=6)
    parser.add_argument("--learning-questions", type=int, default=3)
    parser.add_argument("--eval-rollouts", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32, help="learning run: Executor tokens per turn")
    parser.add_argument("--smollm2-steps", type=int, default=0, help="speed run: steps for the SmolLM2 configs (0 = the config's)")
    parser.add_argument("--out", default=str(REPO / ".mia" / "training" / "bench"))
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        result = _speed(rest[0], rest[1], rest[2], int(rest[3])) if kind == "speed" else _learning(*map(int, rest[:4]), rest[4])
        print(json.dumps(result))
        return
    if args.only in (None, "speed"):
        print("| config | stage | episodes/step | s/step | steps/s | peak RSS (MiB) | mean reward per step |")
        print("|---|---|---|---|---|---|---|")
        for stage, config in SPEED_CONFIGS:
            if args.configs and config not in args.configs:
                continue
            steps = args.smollm2_steps if "smollm2" in config else 0
            r = _child(["speed", stage, config, f"{args.out}/{Path(config).stem}", str(steps)])
            print(f"| {config} | {stage} | {r['episodes_per_step']} | {r['s_per_step']:.1f} | {r['steps_per_s']:.4f} "
                  f"| {r['peak_rss_mb']:.0f} | {r['mean_reward']} |", flush=True)
    if args.only in (None, "learning"):
        r = _child(["learning", str(args.learning_steps), str(args.learning_questions), str(args.eval_rollouts),
                    str(args.max_new_tokens), f"{args.out}/learning"])
        print()
        print("| model | train questions | eval rollouts/question | GRPO steps | reward before | reward after | train time (s) | step rewards |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| SmolLM2-135M Executor (LoRA) | {r['questions']} | {r['eval_rollouts']} | {r['steps']} | "
              f"{r['reward_before']:.3f} | {r['reward_after']:.3f} | {r['train_s']:.0f} | {r['step_rewards']} |")


if __name__ == "__main__":
    main()
