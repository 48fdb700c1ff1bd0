"""Follow-ups against the full question: HotpotQA `train` bridge questions asked as a thread of two, the
first hop and then the second as a follow-up that names the first hop's answer only by a pronoun, and,
paired on the same questions, the full question typed at once.

The pairs come from `data/hotpotqa/train.jsonl` only (never `dev`, nor `train-extra`, which is for
training only and whose paragraphs the search corpus does not hold): 30 built by rule and 73 written by
hand (`build_pairs`, 103 in all, the first 100 in train's order by default; a question both give is
the rule's).

Most are built by rule from each question's supporting facts (`pair_of` in
benchmarks/followup_pairs_rule.py, which says how); the rest are written by hand in
`benchmarks/followup_pairs_hand.jsonl` (`hand_pairs` in benchmarks/followup_pairs_hand.py, which says
how they were written and which rows loading refuses).

The thread is asked as the app asks it: the first question, then the follow-up made standalone with
its thread (backend.follow_up) and its passages reused. Each arm runs in fresh namespaces (cold memory).
It prints judge accuracy both ways with the exact McNemar test, seconds and searches per question, how
often the first hop was right and how often the follow-up was answered without a new search. Rows are
written as they finish, so a stopped run goes on where it stopped.

    .venv/bin/python benchmarks/followup_pairs.py --pairs         # the pairs, by rule and by hand
    .venv/bin/python benchmarks/followup_pairs.py --limit 100     # the default model: hours on 2 cores
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.followup_pairs_hand import hand_pairs  # noqa: E402
from benchmarks.followup_pairs_rule import ThreadPair, pair_of  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TRAIN_FILES = (REPO / "data" / "hotpotqa" / "train.jsonl",)
HAND_PAIRS = REPO / "benchmarks" / "followup_pairs_hand.jsonl"
DEFAULT_OUT = REPO / ".mia" / "followup-pairs"


def build_pairs(paths=TRAIN_FILES, limit: int = 100, hand: Path | None = HAND_PAIRS) -> list[ThreadPair]:
    """Up to `limit` thread pairs, in file order, from the bridge questions of `paths`: the rule's, and
    for the questions it builds none for, those written by hand in `hand` (None: the rule's only)."""
    records = [json.loads(line) for path in paths
               for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    ruled = {pair.id: pair for pair in map(pair_of, records) if pair is not None}
    written = {pair.id: pair for pair in hand_pairs(hand, records)} if hand is not None else {}
    pairs = [ruled.get(record["id"]) or written.get(record["id"]) for record in records]
    return [pair for pair in pairs if pair is not None][:limit]


def by_source(pairs) -> str:
    """How many pairs the rule built and how many were written by hand."""
    hand = sum(pair.rule == "hand" for pair in pairs)
    return f"{len(pairs) - hand} built by rule, {hand} written by hand"


def _searches(events) -> int:
    from backend.events import ToolCalled

    return sum(1 for event in events if isinstance(event, ToolCalled) and event.name.endswith("search"))


def _verdict(events) -> str:
    from backend.replay import replay

    run = replay(events)
    return run.verdict.label if run.verdict is not None else ("failed" if run.failure is not None else "none")


def ask_pair(agent, pair: ThreadPair, number: int) -> dict:
    """One pair both ways: as a thread (the first question, then the follow-up read with it) and as the
    full question, each in a fresh namespace."""
    from backend.agent import RunRequest
    from backend.follow_up import FollowUp
    from backend.replay import replay

    started = time.perf_counter()
    first = list(agent.run(RunRequest(pair.first_question, namespace=f"thread-{number}",
                                      ground_truth=pair.first_answer)))
    made = agent.read_follow_up(pair.follow_up, f"thread-{number}", first[0].run_id)
    follow = list(agent.run(RunRequest(made.question, namespace=f"thread-{number}", ground_truth=pair.answer,
                                       follow_up=FollowUp(first[0].run_id, pair.follow_up, made.how))))
    thread_seconds = time.perf_counter() - started
    started = time.perf_counter()
    full = list(agent.run(RunRequest(pair.question, namespace=f"full-{number}", ground_truth=pair.answer)))
    full_seconds = time.perf_counter() - started
    return {"id": pair.id, "rule": pair.rule, "first_answer": replay(first).answer,
            "first_right": _verdict(first) == "correct", "rewritten": made.question,
            "rewrite_named_the_bridge": pair.first_answer.lower() in made.question.lower(),
            "model_chose": made.model_called, "thread_answer": replay(follow).answer,
            "thread_right": _verdict(follow) == "correct", "thread_seconds": round(thread_seconds, 2),
            "thread_searches": _searches(first) + _searches(follow), "follow_up_searches": _searches(follow),
            "full_answer": replay(full).answer, "full_right": _verdict(full) == "correct",
            "full_seconds": round(full_seconds, 2), "full_searches": _searches(full)}


def run_pairs(agent, pairs: list[ThreadPair], rows_path: Path, progress: bool = True) -> list[dict]:
    """Each pair asked both ways, a row per pair in `rows_path` (JSONL); pairs already there are skipped."""
    rows_path.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if rows_path.exists():
        for line in rows_path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                done[row["id"]] = row
    for number, pair in enumerate(pairs, 1):
        if pair.id in done:
            continue
        row = ask_pair(agent, pair, number)
        with rows_path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        done[pair.id] = row
        if progress:
            print(f"[{number}/{len(pairs)}] {pair.id}: thread {row['thread_right']}, full {row['full_right']}",
                  file=sys.stderr, flush=True)
    return [done[pair.id] for pair in pairs if pair.id in done]


def table(rows: list[dict]) -> str:
    from backend.eval.significance import mcnemar_exact

    n = len(rows)
    if not n:
        return "No rows."
    only_thread = sum(r["thread_right"] and not r["full_right"] for r in rows)
    only_full = sum(r["full_right"] and not r["thread_right"] for r in rows)
    hand = sum(r["rule"] == "hand" for r in rows)
    lines = [f"{n} thread pairs (HotpotQA train bridge questions: {n - hand} built by rule, {hand} written by hand)",
             "",
             "| asked | judge accuracy | p50 s | mean s | searches/q |", "|---|---|---|---|---|"]
    for arm, label in (("thread", "as a thread: first hop, then the follow-up"), ("full", "the full question at once")):
        right = sum(r[f"{arm}_right"] for r in rows)
        seconds = [r[f"{arm}_seconds"] for r in rows]
        lines.append(f"| {label} | {right / n:.1%} ({right}/{n}) | {statistics.median(seconds):.1f} | "
                     f"{statistics.mean(seconds):.1f} | {statistics.mean(r[f'{arm}_searches'] for r in rows):.2f} |")
    lines += ["", f"Paired: right only as a thread {only_thread}, only at once {only_full}; exact McNemar "
                  f"p = {mcnemar_exact(only_thread, only_full):.3f}.",
              f"First hop right: {sum(r['first_right'] for r in rows)}/{n}; the rewrite named the bridge: "
              f"{sum(r['rewrite_named_the_bridge'] for r in rows)}/{n} (the model chose in "
              f"{sum(r['model_chose'] for r in rows)}); follow-ups answered without a new search: "
              f"{sum(r['follow_up_searches'] == 0 for r in rows)}/{n}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=100, help="thread pairs (default 100)")
    parser.add_argument("--pairs", action="store_true", help="print the pairs the rule builds and stop")
    parser.add_argument("--config", help="TOML configuration (default: mia.toml)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"rows and runs (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    pairs = build_pairs(limit=args.limit)
    if args.pairs:
        for pair in pairs:
            print(f"[{pair.rule}] {pair.question}\n  1. {pair.first_question} -> {pair.first_answer}\n"
                  f"  2. {pair.follow_up} -> {pair.answer}")
        print(f"{len(pairs)} pairs (of {args.limit} asked for): {by_source(pairs)}")
        return 0
    from backend.config import load_config
    from backend.eval.runner import open_eval_runtime

    runtime = open_eval_runtime(load_config(args.config), args.out)
    try:
        rows = run_pairs(runtime.agent, pairs, args.out / "rows.jsonl")
    finally:
        runtime.close()
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
