"""Training benchmark: speed and peak memory of the CPU smoke configs, and a small learning signal.

    .venv/bin/python benchmarks/training_bench.py                 # everything (an hour or more on 2 cores)
    .venv/bin/python benchmarks/training_bench.py --only speed    # the smoke configs only
    .venv/bin/python benchmarks/training_bench.py --only learning --stage planner --learning-steps 4

Each measurement runs in its own process so peak memory (max RSS) belongs to that run alone.
"Learning" takes the first train questions, evaluates the SmolLM2 policy on them (sampled rollouts
at the training temperature, as training samples, with a fixed seed), trains it for a few GRPO
steps on the same questions, and evaluates again with the same seed. `--stage planner` (the
default) trains the Planner against a frozen SmolLM2 Executor (stage 2); `--stage executor` trains
the Executor against a frozen SmolLM2 Planner (stage 1, one Executor turn, no reflection).
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


LEARNING_CONFIGS = {"planner": "planner_smollm2_cpu.yaml", "executor": "executor_smollm2_cpu.yaml"}
LEARNING_MODELS = {"planner": "SmolLM2-135M Planner (LoRA), frozen SmolLM2 Executor",
                   "executor": "SmolLM2-135M Executor (LoRA), frozen SmolLM2 Planner"}
EVAL_SEED = 123


def _evaluate(trainer, rollouts: int, label: str) -> dict:
    """Mean reward and mean reward parts of `StageTrainer.evaluate` on the trainer's own (training)
    questions, from a fixed seed so before and after sample alike."""
    import random

    import torch

    def show(i: int, j: int, reward, seconds: float) -> None:
        print(f"[eval {label}] question {i}/{len(trainer.records)} rollout {j}/{rollouts}: "
              f"reward {reward.total:.3f} {reward.parts} ({seconds:.0f} s)", file=sys.stderr, flush=True)

    random.seed(EVAL_SEED)
    torch.manual_seed(EVAL_SEED)
    rewards = trainer.evaluate(trainer.records, rollouts, on_rollout=show)
    return {
        "reward": sum(r.total for r in rewards) / len(rewards),
        "parts": {k: sum(r.parts[k] for r in rewards) / len(rewards) for k in rewards[0].parts},
    }


def _learning(stage: str, steps: int, questions: int, eval_rollouts: int, max_new_tokens: int, out: str) -> dict:
    from dataclasses import replace

    from training.grpo_config import load_settings
    from training.trainer import StageTrainer, peak_rss_mb

    settings = load_settings(CONFIGS / LEARNING_CONFIGS[stage], output_dir=out)
    settings.steps, settings.num_questions, settings.questions_per_step = steps, questions, 1
    if max_new_tokens:
        settings.roles["executor"] = replace(settings.roles["executor"], max_new_tokens=max_new_tokens)
    if stage == "executor":
        # Kept short so a run fits a busy 2-core machine: one Executor turn, no reflection.
        settings.agent = replace(settings.agent, max_turns=1, reflections=0)
    log_path = Path(out) / "log.jsonl"
    log_path.unlink(missing_ok=True)
    trainer = StageTrainer(stage, settings)
    before = _evaluate(trainer, eval_rollouts, "before")
    started = time.perf_counter()
    logs = trainer.train(log_path=log_path)
    train_seconds = time.perf_counter() - started
    after = _evaluate(trainer, eval_rollouts, "after")
    return {
        "stage": stage, "config": LEARNING_CONFIGS[stage], "questions": len(trainer.records),
        "eval_rollouts": eval_rollouts, "steps": steps, "rollouts_per_step": settings.rollouts_per_question,
        "executor_max_new_tokens": settings.executor_max_new_tokens,
        "reward_before": before["reward"], "reward_after": after["reward"],
        "parts_before": before["parts"], "parts_after": after["parts"], "train_s": train_seconds,
        "step_rewards": [round(log.mean_reward, 3) for log in logs], "peak_rss_mb": peak_rss_mb(),
    }


def _child(args: list[str]) -> dict:
    # stderr passes through, so the progress (tqdm, evaluation rollouts) shows while a long run goes on.
    completed = subprocess.run([sys.executable, __file__, "--child", *args], stdout=subprocess.PIPE, text=True, cwd=REPO)
    if completed.returncode != 0:
        raise RuntimeError(f"benchmark child {args} failed with exit status {completed.returncode} (its stderr is above)")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("speed", "learning"))
    parser.add_argument("--configs", nargs="*", help="speed run: only these config files")
    parser.add_argument("--stage", choices=tuple(LEARNING_CONFIGS), default="planner",
                        help="learning run: the policy being trained (planner: stage 2 with a frozen SmolLM2 "
                             "Executor; executor: stage 1 with a frozen SmolLM2 Planner)")
    parser.add_argument("--learning-steps", type=_positive, default=4)
    parser.add_argument("--learning-questions", type=_positive, default=4, help="learning run: train questions")
    parser.add_argument("--eval-rollouts", type=_positive, default=4, help="learning run: sampled rollouts per question")
    parser.add_argument("--max-new-tokens", type=_positive, default=None,
                        help="learning run: Executor tokens per turn (default: the config's roles.executor.max_new_tokens)")
    parser.add_argument("--smollm2-steps", type=int, default=0, help="speed run: steps for the SmolLM2 configs (0 = the config's)")
    parser.add_argument("--out", default=str(REPO / ".mia" / "training" / "bench"))
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smollm2_steps < 0:
        parser.error(f"--smollm2-steps must be 0 or more, got {args.smollm2_steps}")
    return args


def _parts(parts: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in parts.items())


def learning_table(r: dict) -> str:
    rows = [
        "| stage | model | train questions | eval rollouts/question | GRPO steps (rollouts/step) | reward before "
        "| reward after | parts before | parts after | train time (s) | step rewards | peak RSS (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {r['stage']} | {LEARNING_MODELS[r['stage']]} | {r['questions']} | {r['eval_rollouts']} "
        f"| {r['steps']} ({r['rollouts_per_step']}) | {r['reward_before']:.3f} | {r['reward_after']:.3f} "
        f"| {_parts(r['parts_before'])} | {_parts(r['parts_after'])} | {r['train_s']:.0f} | {r['step_rewards']} "
        f"| {r['peak_rss_mb']:.0f} |",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "speed":
            result = _speed(rest[0], rest[1], rest[2], int(rest[3]))
        else:
            result = _learning(rest[0], *map(int, rest[1:5]), rest[5])
        print(json.dumps(result))
        return
    started = time.perf_counter()
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
        r = _child(["learning", args.stage, str(args.learning_steps), str(args.learning_questions),
                    str(args.eval_rollouts), str(args.max_new_tokens or 0), f"{args.out}/learning-{args.stage}"])
        print()
        print(learning_table(r))
        print(f"\nExecutor tokens per turn: {r['executor_max_new_tokens']}.")
    print(f"Wall time: {time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
