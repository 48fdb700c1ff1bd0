"""The Executor's reader alone: each question's gold paragraphs are searched by their titles (the
real wiki search, BM25, so other passages come along as they would in a run), then the answer is
read as a run reads it. Isolates reading from research: "gold retrieved, answer still wrong" is
where most misses of the N = 100 evaluation are lost.

Usage: OMP_WAIT_POLICY=PASSIVE MIA_SEARCH_HYBRID=false .venv/bin/python benchmarks/reader_bench.py \
           --data data/hotpotqa/train.jsonl --type comparison --limit 40 [--variants facts,plain]

Variants: `facts` (a two-option question's facts are copied first, a comparison of dates or amounts
is decided from them), `plain` (the choice straight from the results), `quote` (`facts`, and an open
question's answer read after copying the sentence that states it: the app's default), `quote-no-place`
(`quote` without telling a "where" question's reader that the answer is a place; `--asking place` keeps
only those questions),
`facts-kind` (`facts`, the facts asked for as what the question compares: a date, a number and what it
counts, else what the results say the option is or where it is from).
All variants read the same searched conversation, so the rows are paired. Tune on `train`; never on
`dev`.
Prints one table (exact match, containment either way as whole words, seconds per question) per variant; the
variants share the model's prompt cache, so only the first one listed pays for the searched conversation.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from backend.answer_match import answer_contains  # noqa: E402
from backend.config import load_config  # noqa: E402
from backend.eval.losses import record_supporting_titles  # noqa: E402
from backend.eval.metrics import exact_match  # noqa: E402
from backend.executor import ExecutorSession  # noqa: E402
from backend.metering import RunMeter  # noqa: E402
from backend.question import Question  # noqa: E402
from backend.runtime import make_chat_model  # noqa: E402
from backend.tools import build_tools  # noqa: E402

VARIANTS = {  # (compare_by_facts, read_by_quote, says_a_place, facts_by_kind)
    "facts": (True, False, True, False), "plain": (False, False, True, False), "quote": (True, True, True, False),
    "quote-no-place": (True, True, False, False), "facts-kind": (True, False, True, True),
}


def read(model, tools, record: dict, variant: tuple[bool, bool, bool, bool]) -> dict:
    question = Question.parse(record["question"])
    compare_by_facts, read_by_quote, says_a_place, facts_by_kind = variant
    session = ExecutorSession(model, tools, RunMeter(), "reader-bench", guided=True, compare_by_facts=compare_by_facts,
                              read_by_quote=read_by_quote, says_a_place=says_a_place, facts_by_kind=facts_by_kind)
    session.start(question, [])
    for title in record_supporting_titles(record):
        for _ in session.search("search", title):
            pass
    started = time.perf_counter()
    answer = ""
    generator = session.read_answer(question)
    try:
        while True:
            next(generator)
    except StopIteration as stop:
        answer = stop.value or ""
    seconds = time.perf_counter() - started
    gold = record["answer"]
    retrieved = {p.get("title") for p in session.passages}
    return {"id": record["id"], "type": record.get("type", ""), "closed": question.closed,
            "answer": answer, "gold": gold, "em": exact_match(answer, gold),
            "contains": float(answer_contains(answer, gold) or answer_contains(gold, answer)),
            "gold_retrieved": all(t in retrieved for t in record_supporting_titles(record)), "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="data/hotpotqa/train.jsonl")
    parser.add_argument("--type", choices=("all", "bridge", "comparison"), default="all")
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--variants", default="facts,plain", help="comma-separated: " + ", ".join(VARIANTS))
    parser.add_argument("--asking", choices=("any", "place"), default="any",
                        help="place: only questions asking where (backend.hops.asked_kind)")
    parser.add_argument("--rows", type=Path, help="write every answer as JSON lines here")
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
    if "dev" in Path(args.data).name:
        print("note: reading dev questions; tune on train only", file=sys.stderr)
    records = [json.loads(line) for line in Path(args.data).read_text(encoding="utf-8").splitlines() if line.strip()]
    records = [r for r in records if args.type == "all" or r.get("type") == args.type][args.offset:args.offset + args.limit]
    if args.asking == "place":
        records = [r for r in records if Question.parse(r["question"]).asks_where]

    config = load_config()
    model = make_chat_model(config, "executor")
    tools = build_tools(cache_dir=config.index_cache_dir, web_enabled=False, progress=True)
    tools = {"search": tools["search"]}
    rows: dict[str, list[dict]] = {v: [] for v in variants}
    for n, record in enumerate(records, 1):
        for variant in variants:
            row = read(model, tools, record, VARIANTS[variant])
            rows[variant].append(row)
            print(f"[{n}/{len(records)}] {variant}: {row['answer']!r} (gold {row['gold']!r}) em={row['em']:.0f}", file=sys.stderr)
    if args.rows:
        with args.rows.open("w", encoding="utf-8") as out:
            for variant, items in rows.items():
                for row in items:
                    out.write(json.dumps({"variant": variant, **row}) + "\n")

    print(f"\nReader on {len(records)} {args.type} questions of {Path(args.data).name} (offset {args.offset}), "
          f"gold paragraphs searched by title; model {getattr(model, 'name', '?')}\n")
    print("| variant | N | exact match | answer contains gold, or gold the answer | closed questions right (contains) | s/question p50 (the first "
          "variant pays the prompt, the next reads it from the cache) |")
    print("|---|---|---|---|---|---|")
    for variant, items in rows.items():
        closed = [r for r in items if r["closed"]]
        closed_right = f"{sum(r['contains'] for r in closed):.0f}/{len(closed)}" if closed else "-"
        print(f"| {variant} | {len(items)} | {statistics.mean(r['em'] for r in items):.1%} | "
              f"{statistics.mean(r['contains'] for r in items):.1%} | {closed_right} | "
              f"{statistics.median(r['seconds'] for r in items):.1f} |")
    if len(variants) == 2:
        a, b = (rows[v] for v in variants)
        only_a = sum(x["contains"] > y["contains"] for x, y in zip(a, b))
        only_b = sum(y["contains"] > x["contains"] for x, y in zip(a, b))
        print(f"\nPaired (containment): only {variants[0]} {only_a}, only {variants[1]} {only_b}")


if __name__ == "__main__":
    main()
