"""Command line: `python -m backend.eval --data dev.jsonl --method mia --limit 50 --out DIR`.

`--planner-version DIR` puts a test-time-learning Planner version (a folder holding adapter/) in
the Planner's place. Also `--compare DIR [DIR ...] --out DIR` (a table and a learning-curve plot of
finished evaluations), `--summarize DIR` (recompute a folder's summary from its rows) and `--table
results/<table>` (recompute a published table and its rows' sha256 from the rows committed there).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from backend.methods import METHOD_NAMES as METHODS
from backend.config import ConfigError, load_config
from backend.eval.compare import compare
from backend.eval.datasets import DatasetError
from backend.eval.report import METRICS_HEADER, SUMMARY_MD, metrics_table_row, write_summary
from backend.eval.results import ResultsError
from backend.eval.spec import EvalError, EvalSpec, check_or_write_manifest, copy_memory_from, read_planner_version
from backend.eval.table import recompute_table


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m backend.eval",
        description="Run a stream of questions through the real agent and report accuracy, cost and time.",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--data", type=Path, help="questions: HotpotQA JSONL or {id, question, answer, image?, hide_titles?} JSONL")
    mode.add_argument("--compare", type=Path, nargs="+", metavar="DIR", help="evaluation folders to compare")
    mode.add_argument("--summarize", type=Path, metavar="DIR", help="recompute the summary of an evaluation folder")
    mode.add_argument("--table", type=Path, metavar="DIR",
                      help="recompute a published table (results/<table>) and its rows' sha256 from its committed rows")
    parser.add_argument("--method", choices=METHODS, default="mia", help="the agent loop or baseline to run")
    parser.add_argument("--limit", type=int, help="only the first N questions (with --compare: of each stream)")
    parser.add_argument("--skip", type=int, default=0, help="leave out the first N questions of --data")
    parser.add_argument("--teach", action="store_true",
                        help="ask each question without its ground truth, then give it as feedback, as a person "
                             "types the right answer in the app (the first stage of teach-and-retest)")
    parser.add_argument("--warm-from", type=Path, help="build memory from these questions first (with ground truth)")
    parser.add_argument("--warm-limit", type=int, help="only the first N warm-up questions")
    parser.add_argument("--memory-from", type=Path, metavar="DIR",
                        help="start from a copy of this finished evaluation's memory (same method): a second pass")
    parser.add_argument("--planner-version", type=Path, metavar="DIR",
                        help="a test-time-learning Planner version folder (<data_dir>/ttrl/versions/v0003, holding "
                             "adapter/): the Planner answers with it, on the backend it runs on")
    parser.add_argument("--out", type=Path, help="output folder (default: <data_dir>/eval/<method>-<data>[-warm])")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--accept-code-change", action="store_true",
                        help="resume a folder whose rows other code wrote (eval.json records from which row)")
    parser.add_argument("--label", default="", help="the name reports give this evaluation")
    parser.add_argument("--config", type=Path, help="a TOML configuration (default: MIA_CONFIG or mia.toml)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--labels", type=Path, nargs="+", metavar="FILE",
                        help="with --compare: hand labels of answers (benchmarks/judge_labels/*.jsonl) to count the Judge's errors")
    args = parser.parse_args(argv)
    if args.data is None and (args.warm_from or args.warm_limit or args.memory_from or args.skip or args.teach
                              or args.planner_version):
        parser.error("--warm-from, --warm-limit, --memory-from, --skip, --teach and --planner-version go with --data")
    if (args.summarize or args.table) and args.limit:
        parser.error("--limit goes with --data or --compare")
    if args.table and args.out:
        parser.error("--table prints the table; it writes no folder (leave out --out)")
    if args.labels and not args.compare:
        parser.error("--labels goes with --compare")
    if args.compare and args.out is None:
        parser.error("--compare needs --out, the folder for the table and the plot")
    return args


def default_out_dir(data_dir: Path, args: argparse.Namespace) -> Path:
    name = f"{args.method}-{args.data.stem}"
    if args.warm_from:
        name += f"-warm-{args.warm_from.stem}{args.warm_limit or ''}"
    if args.skip:
        name += f"-after{args.skip}"
    if args.teach:
        name += "-taught"
    if args.memory_from:
        name += f"-memory-of-{args.memory_from.name}"
    if args.planner_version:
        name += f"-planner-{args.planner_version.resolve().name}"
    return data_dir / "eval" / name


def run_evaluation(args: argparse.Namespace) -> int:
    from backend.eval.runner import evaluate, open_eval_runtime  # loads torch and the agent

    config = load_config(args.config)
    out_dir = args.out or default_out_dir(config.data_dir, args)
    spec = EvalSpec(
        data=args.data, method=args.method, out_dir=out_dir, limit=args.limit, warm_from=args.warm_from,
        warm_limit=args.warm_limit, seed=args.seed, label=args.label, memory_from=args.memory_from,
        skip=args.skip, teach=args.teach, accept_code_change=args.accept_code_change,
        planner_version=read_planner_version(args.planner_version) if args.planner_version else None,
    )
    spec.check_inputs()
    check_or_write_manifest(spec, config)  # another evaluation or other code: refused before loading models
    copy_memory_from(spec)  # before the runtime opens the evaluation's memory
    runtime = open_eval_runtime(config, out_dir, progress=not args.no_progress, planner_version=spec.planner_version)
    try:
        evaluate(spec, runtime, progress=not args.no_progress)
    except KeyboardInterrupt:
        print(f"\nInterrupted: the finished rows are in {out_dir}; run the same command again to resume.", file=sys.stderr)
        return 130
    finally:
        runtime.close()
    document = write_summary(out_dir)
    print(METRICS_HEADER)
    print(metrics_table_row(document["manifest"]["label"], document["summary"]))
    print(f"\nSummary: {out_dir / SUMMARY_MD}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.compare:
            print(f"Comparison: {compare(args.compare, args.out, limit=args.limit, labels=args.labels)}")
            return 0
        if args.table:
            print(recompute_table(args.table), end="")
            return 0
        if args.summarize:
            document = write_summary(args.summarize)
            print(METRICS_HEADER)
            print(metrics_table_row(document["manifest"]["label"], document["summary"]))
            return 0
        return run_evaluation(args)
    except (ConfigError, DatasetError, EvalError, ResultsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
