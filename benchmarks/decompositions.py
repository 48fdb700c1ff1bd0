"""How the Planner breaks questions into sub-questions, without researching them: for tuning the
decomposition prompt and the checks on its output (backend.hops.sensible) on `train`.

For each question it prints the sub-questions kept and why any were left out; then how many
questions became one hop and why, how many hops the rest have, and, for bridge questions, how often
the last hop refers to an earlier one (#1) as a chain should, and how many end by asking a date the
question does not ask for (a side check, backend.hops.answering_hop).

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/decompositions.py --limit 30
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.config import load_config  # noqa: E402
from backend.hops import asks_for_time  # noqa: E402
from backend.question import Question  # noqa: E402
from backend.planner import Planner  # noqa: E402
from backend.runtime import make_chat_model  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("train", "dev"), default="train")
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--skip", type=int, default=0)
    args = parser.parse_args()
    config = load_config()
    planner = Planner(make_chat_model(config, "planner", progress=False),
                      max_new_tokens=min(config.role("planner").max_new_tokens, 200))
    path = REPO / "data" / "hotpotqa" / f"{args.split}.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    records = records[args.skip: args.skip + args.limit]
    one_hop, hop_counts, chained_bridges, bridges, dated = Counter(), Counter(), 0, 0, 0
    started = time.perf_counter()
    for record in records:
        question = Question.parse(record["question"])
        blueprint = planner.decompose(question)
        steps = blueprint.steps
        print(f"\nQ: {record['question']}  [{record.get('type', '?')}; gold: {record['answer']}]")
        for number, step in enumerate(steps, 1):
            print(f"  {number}. {step}")
        if blueprint.recovered:
            print(f"  ({blueprint.recovered})")
        if steps == [record["question"]]:
            one_hop[(blueprint.recovered or "written as one hop").split(":")[0]] += 1
        else:
            hop_counts[len(steps)] += 1
        dated += len(steps) > 1 and asks_for_time(steps[-1]) and not question.asks_when
        if record.get("type") == "bridge" and len(steps) > 1:
            bridges += 1
            chained_bridges += "#" in steps[-1]
    seconds = time.perf_counter() - started
    print(f"\n{len(records)} {args.split} questions (from {args.skip}), {seconds / len(records):.1f} s each")
    print("| outcome | questions |\n|---|---|")
    for reason, count in one_hop.most_common():
        print(f"| one hop: {reason} | {count} |")
    for hops, count in sorted(hop_counts.items()):
        print(f"| {hops} hops | {count} |")
    print(f"\nBridge questions with 2+ hops whose last hop refers to an earlier one: {chained_bridges} of {bridges}")
    print(f"Decompositions whose last hop asks when and the question does not (a side check): {dated}")


if __name__ == "__main__":
    main()
