"""How far the Judge can be trusted: its verdicts on stored evaluation runs against hand labels.

For each run that `benchmarks/judge_labels/*.jsonl` labels (whether the answer is really right, read
by a person), the Judge grades the stored answer twice: with the gold answer (as the evaluation
harness and a typed right answer do) and without it, from the passages the run retrieved (as the
app does when no right answer is typed). Printed per path the Judge took: how many verdicts, how
often it said "correct", the precision and recall of that "correct", and how often it said "unsure".

Usage:
  OMP_WAIT_POLICY=PASSIVE MIA_SEARCH_HYBRID=false .venv/bin/python benchmarks/judge_quality.py \\
      .mia/eval/qwen-none .mia/eval/qwen-mia [--labels benchmarks/judge_labels/qwen-dev.jsonl] [--out .mia/judge-quality]
The rows go to OUT/verdicts.jsonl (their sha256 is printed); the Judge runs on the configured judge role.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from backend.config import REPO_ROOT, load_config  # noqa: E402
from backend.eval.losses import read_labels, returned_passages  # noqa: E402
from backend.eval.spec import logged_events, read_manifest  # noqa: E402
from backend.judge import CORRECT, UNSURE, Judge  # noqa: E402

DEFAULT_LABELS = REPO_ROOT / "benchmarks" / "judge_labels" / "qwen-dev.jsonl"


def path_of(method: str) -> str:
    """The Judge's path as a table row: 'llm-choice (logprob, calibrated)' -> 'llm-choice'."""
    return method.split(" (")[0]


def retrieved_passages(eval_dir: Path, namespace: str, run_id: str) -> list[dict]:
    return returned_passages(logged_events(eval_dir, namespace, run_id) or [])


def labelled_runs(eval_dirs: list[Path], labels_path: Path) -> list[dict]:
    labels = read_labels([labels_path])
    runs = []
    for eval_dir in eval_dirs:
        namespace = read_manifest(eval_dir)["namespace"]
        for line in (eval_dir / "rows.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            key = (row["id"], row["answer"])
            if key in labels and not row.get("error"):
                runs.append({"eval": eval_dir.name, "id": row["id"], "question": row["question"], "gold": row["gold"],
                             "answer": row["answer"], "right": labels[key], "run_id": row["run_id"],
                             "passages": retrieved_passages(eval_dir, namespace, row["run_id"])})
    return runs


def table(verdicts: list[dict], key: str) -> list[str]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for v in verdicts:
        groups[v[f"{key}_path"]].append(v)
        groups["all"].append(v)
    lines = ["| path | verdicts | said correct | precision of correct | recall of correct | said unsure |",
             "|---|---|---|---|---|---|"]
    right_total = sum(v["right"] for v in verdicts)
    for name in sorted(groups, key=lambda n: (n == "all", n)):
        items = groups[name]
        said = [v for v in items if v[key] == CORRECT]
        true_pass = sum(v["right"] for v in said)
        right_here = sum(v["right"] for v in items) if name != "all" else right_total
        precision = f"{true_pass / len(said):.2f}" if said else "–"
        recall = f"{true_pass / right_here:.2f}" if right_here else "–"
        unsure = sum(v[key] == UNSURE for v in items)
        lines.append(f"| {name} | {len(items)} | {len(said)} | {precision} ({true_pass}/{len(said)}) | "
                     f"{recall} ({true_pass}/{right_here}) | {unsure} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("eval_dirs", nargs="+", type=Path, help="evaluation folders (rows.jsonl + runs/)")
    parser.add_argument("--labels", type=Path, default=DEFAULT_LABELS)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / ".mia" / "judge-quality")
    parser.add_argument("--limit", type=int, default=0, help="grade only the first N labelled runs")
    args = parser.parse_args(argv)

    from backend.runtime import make_chat_model

    config = load_config()
    model = make_chat_model(config, "judge", progress=True)
    judge = Judge(model, require_overlap=model.traits.small)
    runs = labelled_runs(args.eval_dirs, args.labels)
    if args.limit:
        runs = runs[: args.limit]
    if not runs:
        print(f"No run in {', '.join(map(str, args.eval_dirs))} is labelled in {args.labels}.", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    verdicts, started = [], time.perf_counter()
    for i, run in enumerate(runs, 1):
        with_gold = judge.grade(run["question"], run["answer"], run["gold"])
        without = judge.evaluate_without_ground_truth(run["question"], run["answer"], run["passages"])
        verdicts.append({"eval": run["eval"], "id": run["id"], "answer": run["answer"], "right": run["right"],
                         "with_gold": with_gold.label, "with_gold_path": path_of(with_gold.method),
                         "without_gold": without.label, "without_gold_path": path_of(without.method),
                         "without_gold_confidence": without.confidence})
        print(f"\r{i}/{len(runs)} runs graded ({time.perf_counter() - started:.0f} s)", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    rows = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in verdicts)
    (args.out / "verdicts.jsonl").write_text(rows, encoding="utf-8")
    print(f"Judge: {model.name}; {len(verdicts)} hand-labelled runs "
          f"({sum(v['right'] for v in verdicts)} right) from {', '.join(d.name for d in args.eval_dirs)}; "
          f"{time.perf_counter() - started:.0f} s\n")
    print("With the gold answer (evaluation, a typed right answer):\n")
    print("\n".join(table(verdicts, "with_gold")))
    print("\nWithout it (the app when no right answer is typed; unverified):\n")
    print("\n".join(table(verdicts, "without_gold")))
    print(f"\nrows sha256 {hashlib.sha256(rows.encode('utf-8')).hexdigest()} ({args.out / 'verdicts.jsonl'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
