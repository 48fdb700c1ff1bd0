"""Command line: `python -m training reader-data|reader|reader-validate|executor|planner|alternate|dataset|verl-check|ttrl ...`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from backend.llm.base import LLMError
from training.datasets import DatasetError
from training.grpo_config import TrainingConfigError
from training.reader_data import ReaderDataError
from backend.config import ConfigError

DEFAULT_CONFIGS = Path(__file__).resolve().parent / "configs"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m training", description="GRPO training of the Executor and Planner.")
    commands = parser.add_subparsers(dest="command", required=True)
    examples = commands.add_parser("reader-data", help="build the reader's training examples (the Executor stage's data)")
    examples.add_argument("--hotpotqa", type=Path, nargs="+",
                          default=[Path("data/hotpotqa/train.jsonl"), Path("data/hotpotqa/train-extra.jsonl")],
                          help="HotpotQA training files (never dev)")
    examples.add_argument("--model", default="qwen", choices=("qwen", "smollm2", "tiny-random"),
                          help="whose reading the examples are for (its traits decide how the reader reads)")
    examples.add_argument("--limit", type=int, help="only the first N questions")
    examples.add_argument("--runs", type=Path, help="also the runs a deployment's users verified: the app's data folder")
    examples.add_argument("--namespace", default="default", help="with --runs: whose runs")
    examples.add_argument("--memory-url", help="with --runs: the app's memory database, when not <runs>/memory.sqlite")
    examples.add_argument("--trajectories", type=Path, nargs="*", default=[],
                          help="also the Executor's own verified trajectories (python -m training reader-trajectories)")
    examples.add_argument("--out", type=Path, default=Path(".mia/reader/examples.jsonl"))
    examples.add_argument("--verl-dir", type=Path, help="also write them as verl's multi-turn SFT parquet files here")
    sampled = commands.add_parser("reader-trajectories",
                                  help="the Executor's own runs judged right, as reading examples (rejection sampling)")
    sampled.add_argument("--hotpotqa", type=Path, nargs="+",
                         default=[Path("data/hotpotqa/train.jsonl"), Path("data/hotpotqa/train-extra.jsonl")])
    sampled.add_argument("--k", type=int, default=4, help="runs per question: the first greedy, the rest sampled")
    sampled.add_argument("--temperature", type=float, default=0.7)
    sampled.add_argument("--limit", type=int, help="only the first N questions")
    sampled.add_argument("--out", type=Path, default=Path(".mia/reader/trajectories.jsonl"))
    reader = commands.add_parser("reader", help="train the reader's LoRA on its examples (supervised, resumable)")
    reader.add_argument("--config", type=Path, default=DEFAULT_CONFIGS / "reader_qwen_cpu.yaml")
    reader.add_argument("--data", help="override `data`")
    reader.add_argument("--output-dir", help="override `output_dir`")
    reader.add_argument("--epochs", type=float, help="override `epochs`")
    reader.add_argument("--max-examples", type=int, help="override `max_examples`")
    checked = commands.add_parser("reader-validate",
                                  help="score the validation examples as the trainer does, on the base model or an adapter")
    checked.add_argument("--config", type=Path, default=DEFAULT_CONFIGS / "reader_qwen_cpu.yaml")
    checked.add_argument("--data", help="override `data`")
    checked.add_argument("--adapter", type=Path,
                         help="a run's adapter/ folder or one of its checkpoints (leave out: the base model alone)")
    for stage in ("executor", "planner"):
        sub = commands.add_parser(stage, help=f"train the {stage.capitalize()} with GRPO on this machine")
        sub.add_argument("--config", required=True, type=Path, help="YAML settings (see training/configs/)")
        sub.add_argument("--steps", type=int, help="override `steps`")
        sub.add_argument("--output-dir", help="override `output_dir`")
    alt = commands.add_parser("alternate", help="alternate stage 1 and stage 2 for some rounds")
    alt.add_argument("--rounds", type=int, required=True)
    alt.add_argument("--executor-config", type=Path, default=DEFAULT_CONFIGS / "executor_tiny_cpu.yaml")
    alt.add_argument("--planner-config", type=Path, default=DEFAULT_CONFIGS / "planner_tiny_cpu.yaml")
    alt.add_argument("--output-dir", type=Path)
    data = commands.add_parser("dataset", help="build a stage's RL dataset (parquet)")
    data.add_argument("--stage", choices=("executor", "planner"), required=True)
    source = data.add_mutually_exclusive_group(required=True)
    source.add_argument("--hotpotqa", type=Path, help="a HotpotQA-style JSONL file")
    source.add_argument("--runs", type=Path, help="the app's data folder (runs/ and feedback/)")
    data.add_argument("--namespace", default="default", help="with --runs: whose runs to use")
    data.add_argument("--memory-url", help="with --runs: the app's memory database, when not <runs>/memory.sqlite "
                                           "(e.g. the deployment's postgresql+psycopg://... URL)")
    data.add_argument("--limit", type=int)
    data.add_argument("--planner-model", default="smollm2", help="stage executor: who writes the plans")
    data.add_argument("--plan-shape", choices=("steps", "subquestions"), default="subquestions",
                      help="the plans' shape, as the training YAML's agent.plan_shape: numbered steps, or sub-questions "
                           "researched hop by hop (stage executor: decompositions; both: how memories are shown)")
    data.add_argument("--cache-dir", default=".mia/test-cache")
    data.add_argument("--verl", action="store_true", help="write verl's row format instead of ours")
    data.add_argument("--config", help="the app's TOML whose agent.tools the prompts name (default: mia.toml or $MIA_CONFIG)")
    data.add_argument("--out", type=Path, required=True)
    check = commands.add_parser("verl-check", help="compose and validate a verl stage config (no GPU needed)")
    check.add_argument("--stage", choices=("executor", "planner"), required=True)
    check.add_argument("overrides", nargs="*", help="Hydra overrides, key=value")
    ttrl = commands.add_parser(
        "ttrl", help="test-time learning: `ttrl worker` runs the learner; or stream questions with answers, "
                     "show or roll back versions")
    ttrl.add_argument("action", nargs="?", choices=("worker",),
                      help="worker: the deployment's learner as its own process (one per database)")
    ttrl.add_argument("--config", help="worker: the app's TOML configuration (default: mia.toml or $MIA_CONFIG)")
    ttrl.add_argument("--nice", type=int, default=0, help="worker: lower its CPU priority by this much (0-19)")
    ttrl.add_argument("--until-idle", action="store_true", help="worker: stop once nothing is left to learn from")
    ttrl.add_argument("--max-signals", type=int, help="worker: stop after this many signals")
    ttrl.add_argument("--quiet", action="store_true", help="worker: no progress bars (the app's started worker)")
    ttrl.add_argument("--data", type=Path, help="questions with answers (HotpotQA or plain JSONL) to learn from")
    ttrl.add_argument("--limit", type=int, help="only the first N questions")
    ttrl.add_argument("--namespace", default="ttrl-stream", help="whose memory the learned trajectories go to")
    ttrl.add_argument("--data-dir", type=Path, help="the app's data folder (default: mia.toml's paths.data_dir)")
    ttrl.add_argument("--rollback", type=int, metavar="VERSION", help="make an earlier promoted version current")
    return parser


def _test_time_learning(args: argparse.Namespace) -> None:
    """Builds the app's runtime so learning uses exactly the app's models, tools and memory."""
    from dataclasses import replace

    from backend.config import load_config
    from backend.runtime import build_runtime
    from training.ttrl.live import build_learner

    config = load_config(args.config)
    config = replace(config, ttrl=replace(config.ttrl, enabled=True))
    if args.data_dir:
        config = replace(config, data_dir=args.data_dir.resolve())
    if args.action == "worker":
        from memory_db import LeaseHeld
        from training.ttrl.worker import run_worker

        if not 0 <= args.nice <= 19:
            raise ValueError(f"--nice must be 0-19, got {args.nice}.")
        try:
            done = run_worker(config, until_idle=args.until_idle, max_signals=args.max_signals, nice=args.nice,
                              progress=not args.quiet)
        except LeaseHeld as held:
            raise ValueError(str(held)) from None
        print(f"test-time learning worker stopped after {done} signal(s)")
        return
    runtime = build_runtime(config, progress=True)
    try:
        from memory_db import LeaseHeld
        from training.ttrl.learner import learner_owner
        from training.ttrl.worker import LearnerWorker

        # Streaming trains the deployment's Planner: it holds the learner lock as a worker would.
        holder = LearnerWorker(runtime.store.learner_lease(ttl_s=config.ttrl.lease_ttl_s), learner_owner())
        try:
            holder.acquire()
        except LeaseHeld as held:
            raise ValueError(f"{held} (a learner worker is running: stop it before streaming)") from None
        learner = build_learner(runtime, serving=False, owner=holder.owner)
        holder.learner = learner
        try:
            _stream_and_show(args, learner)
        finally:
            holder.close()
    finally:
        runtime.close()


def _stream_and_show(args: argparse.Namespace, learner) -> None:
    from backend.eval.datasets import load_questions
    from training.ttrl.stream import stream_questions, versions_table

    if args.rollback is not None:
        learner.rollback(args.rollback)
    if args.data:
        questions = load_questions(args.data, limit=args.limit)
        new = stream_questions(learner, questions, namespace=args.namespace)
        print(f"learned from {new} new question(s); {len(questions) - new} were already streamed")
    status = learner.status()
    print(versions_table(status.versions, status.current_version))
    print(f"current Planner: v{status.current_version:04d}; pending signals {status.pending}; "
          f"batch {status.batch}/{status.signals_per_update}; folder {learner.root}")


def _build_dataset(args: argparse.Namespace) -> Path:
    from backend.config import load_config
    from backend.llm.embedded import get_embedded_model
    from backend.planner import Planner
    from backend.tools.base import tool_names_line
    from backend.tools.registry import tool_classes
    from training import datasets
    from training.grpo_config import GRPOSettings
    from training.trainer import resolve_model_dir

    if args.hotpotqa:
        items = datasets.load_hotpotqa(args.hotpotqa, args.limit)
    else:
        items = datasets.items_from_runs(args.runs, args.namespace, args.memory_url, args.plan_shape)[: args.limit]
    items = datasets.with_memories(items, datasets.empty_memories(args.plan_shape))
    tools = load_config(args.config).agent.tools  # offered offline to a question without an image
    if args.stage == "executor":
        settings = GRPOSettings(cache_dir=args.cache_dir)
        planner = Planner(get_embedded_model(resolve_model_dir(args.planner_model, settings.cache_path, settings)))
        records = datasets.stage1_records(items, planner, tool_names_line(tool_classes(tools)), args.plan_shape)
    else:
        records = datasets.stage2_records(items, args.plan_shape)
    if args.verl:
        from training.verl_recipe.data import write_verl_parquet

        return write_verl_parquet(records, args.stage, args.out, tools=tools)
    return datasets.write_records(records, args.out)


def _reader_data(args: argparse.Namespace) -> None:
    from tqdm.auto import tqdm

    from training.reader_data import (CANARY_ROWS, load_rows, reader_traits, read_records, reading_examples,
                                      verified_run_examples, write_rows)

    records = read_records(args.hotpotqa, skip_last={"train.jsonl": CANARY_ROWS})[: args.limit]
    traits = reader_traits(args.model)
    rows, kept = [], 0
    for record in tqdm(records, desc="Reading examples", unit="question"):
        examples = reading_examples(record, traits)
        kept += bool(examples)
        rows += [example.to_row() for example in examples]
    if args.runs:
        verified = verified_run_examples(args.runs, args.namespace, traits, args.memory_url)
        rows += [example.to_row() for example in verified]
        print(f"{len(verified)} examples from the verified runs of {args.namespace!r} in {args.runs}")
    for path in args.trajectories:
        rows += load_rows(path)
    digest = write_rows(rows, args.out)
    if args.verl_dir:
        from training.verl_recipe.sft_data import write_verl_sft

        for split, path in write_verl_sft(rows, args.verl_dir).items():
            print(f"verl SFT {split} rows: {path}")
    validation = sum(row["split"] == "validation" for row in rows)
    print(f"wrote {args.out}: {len(rows)} examples ({kept} of {len(records)} HotpotQA questions) "
          f"({validation} validation); sha256 {digest}")


def _reader_trajectories(args: argparse.Namespace) -> None:
    from backend.config import load_config
    from backend.eval.runner import open_eval_runtime
    from training.reader_data import CANARY_ROWS, read_records
    from training.reader_trajectories import sample_trajectories

    if args.k < 1 or args.temperature < 0:
        raise ValueError("--k must be at least 1 and --temperature 0 or more.")
    records = read_records(args.hotpotqa, skip_last={"train.jsonl": CANARY_ROWS})[: args.limit]
    runtime = open_eval_runtime(load_config(), args.out.parent / (args.out.stem + "-runtime"))
    try:
        counts = sample_trajectories(runtime.agent, records, args.out, k=args.k, temperature=args.temperature)
    finally:
        runtime.close()
    print(f"{args.out}: {counts['examples']} examples from {counts['kept_runs']} of {counts['runs']} runs judged right "
          f"({counts['questions']} questions now, {counts['already_done']} done before); add them with "
          f"`python -m training reader-data --trajectories {args.out}`")


def _train_reader(args: argparse.Namespace, argv: list[str] | None) -> None:
    import shlex

    from training.sft_config import load_sft_settings
    from training.sft_trainer import train_reader

    settings = load_sft_settings(args.config, data=args.data, output_dir=args.output_dir, epochs=args.epochs,
                                 max_examples=args.max_examples)
    command = "python -m training " + shlex.join(argv if argv is not None else sys.argv[1:])
    output = train_reader(settings, command=command)
    print(f"reader adapter: {output} (manifest.json says what it was trained on; serve it with "
          f"roles.executor.adapter = \"{output}\")")


def _validate_reader(args: argparse.Namespace) -> None:
    from training.sft_config import load_sft_settings
    from training.sft_trainer import validate_reader

    settings = load_sft_settings(args.config, data=args.data)
    scores = validate_reader(settings, args.adapter)
    n = scores["validation_examples"]
    print(f"{args.adapter or 'base model (no adapter)'}: validation loss {scores['validation_loss']:.3f}, token "
          f"accuracy {scores['validation_token_accuracy']:.1%}, answer predicted whole in "
          f"{round(scores['validation_answer_exact'] * n)} of {n}, {scores['seconds']:.0f} s")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "reader-data":
            _reader_data(args)
        elif args.command == "reader-trajectories":
            _reader_trajectories(args)
        elif args.command == "reader":
            _train_reader(args, argv)
        elif args.command == "reader-validate":
            _validate_reader(args)
        elif args.command in ("executor", "planner"):
            from training.grpo_config import load_settings
            from training.trainer import train_stage

            settings = load_settings(args.config, steps=args.steps, output_dir=args.output_dir)
            result = train_stage(args.command, settings)
            for step in result.steps:
                print(f"step {step.step}: reward {step.mean_reward:.3f} {step.reward_parts} loss {step.loss:.4f} ({step.seconds:.1f}s)")
            print(f"checkpoint: {result.checkpoint}  (use it as [roles.{args.command}] model_dir in mia.toml)")
        elif args.command == "alternate":
            from training.alternate import alternate
            from training.grpo_config import load_settings

            rounds = alternate(load_settings(args.executor_config), load_settings(args.planner_config), args.rounds, args.output_dir)
            for r in rounds:
                print(f"round {r.round}: executor {r.executor_checkpoint} planner {r.planner_checkpoint}")
        elif args.command == "ttrl":
            _test_time_learning(args)
        elif args.command == "dataset":
            print(f"wrote {_build_dataset(args)}")
        elif args.command == "verl-check":
            try:
                from training.verl_recipe.stage_config import load_stage_config
            except ImportError as missing:
                print(f"error: verl-check needs the training environment ({missing.name} is not installed here); "
                      "run `make install-train`, then `.venv-train/bin/python -m training verl-check`.", file=sys.stderr)
                return 2

            config = load_stage_config(args.stage, args.overrides)
            rollout = config.actor_rollout_ref.rollout
            print(f"{args.stage}: ok (n={rollout.n}, lr={config.actor_rollout_ref.actor.optim.lr}, "
                  f"batch={config.data.train_batch_size}, agent loop {rollout.agent.default_agent_loop})")
    except (TrainingConfigError, DatasetError, ReaderDataError, ConfigError, LLMError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
