"""What a person's edit of the plan is worth: HotpotQA `train` bridge questions researched with the
Planner's plan, then with that plan after one person-style edit written by rule from the question's
supporting facts, researched exactly as written (backend.plan_review), paired on the same questions.

The edit names the bridge page, the supporting page the question does not name:

  missing hop   the Planner wrote one hop: "What is <bridge title>?" is added before the question, so
                both pages are searched and the question is read over them
  first hop     the Planner's first hop found something else (its answer does not name the bridge): it
                is reworded to "What is <bridge title>?" and the hops after it name the bridge where
                they said #1

A question whose first hop found the bridge needs no edit and is counted apart. Each question runs in
a fresh namespace (cold memory). It prints how many edited plans became right and how many became
wrong, with the exact McNemar test, and the seconds per run. Rows are written as they finish, so a
stopped run goes on where it stopped.

    .venv/bin/python benchmarks/edited_plans.py --limit 40     # the default model: hours on 2 cores
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.followup_pairs import TRAIN_FILES  # noqa: E402
from benchmarks.followup_pairs_rule import _base  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / ".mia" / "edited-plans"
LOOK_UP = "What is {title}?"


def bridge_title(record: dict) -> str | None:
    """The supporting page the question does not name (its bridge), by its title; None when not one."""
    question, answer = record["question"].lower(), record["answer"].lower()
    titles = list(dict.fromkeys(record["supporting_facts"]["title"]))
    bridge = [_base(t) for t in titles if _base(t).lower() not in question and answer not in _base(t).lower()]
    return bridge[0] if record.get("type") == "bridge" and len(titles) == 2 and len(bridge) == 1 else None


def person_edit(question: str, bridge: str, plan: list[str], first_hop_answer: str) -> tuple[list[str], str] | None:
    """(the edited plan, which edit) for the Planner's `plan`; None when its first hop found the bridge."""
    look_up = LOOK_UP.format(title=bridge)
    if len(plan) <= 1:
        return [look_up, question], "missing hop"
    found = set(re.findall(r"\w+", first_hop_answer.lower()))
    if found and found >= set(re.findall(r"\w+", bridge.lower())):
        return None
    return [look_up, *[re.sub(r"#1\b", bridge, hop) for hop in plan[1:]]], "first hop"


def questions(paths=TRAIN_FILES, limit: int = 40) -> list[tuple[dict, str]]:
    """The first `limit` bridge questions of `paths` with their bridge title."""
    found = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip() and len(found) < limit:
                record = json.loads(line)
                bridge = bridge_title(record)
                if bridge:
                    found.append((record, bridge))
    return found


def ask_question(agent, record: dict, bridge: str, number: int) -> dict:
    """The question with the Planner's plan, then (when the rule edits it) with the edited plan."""
    from backend.agent import RunRequest
    from backend.replay import replay

    question, answer = " ".join(record["question"].split()), record["answer"]
    started = time.perf_counter()
    planners = replay(agent.run(RunRequest(question, namespace=f"planner-{number}", ground_truth=answer)))
    planner_seconds = time.perf_counter() - started
    plan = list(planners.plans[0].steps) if planners.plans else [question]
    first_hop = planners.hops[0].answer if planners.hops else ""
    row = {"id": record["id"], "planner_plan": plan, "planner_right": bool(planners.verdict and planners.verdict.label == "correct"),
           "planner_seconds": round(planner_seconds, 2), "edit": None}
    edited = person_edit(question, bridge, plan, first_hop)
    if edited is None:
        return row
    steps, edit = edited
    started = time.perf_counter()
    persons = replay(agent.run(RunRequest(question, namespace=f"person-{number}", ground_truth=answer, plan=steps,
                                          drafted_plan=plan)))
    return {**row, "edit": edit, "edited_plan": steps, "edited_answer": persons.answer,
            "edited_right": bool(persons.verdict and persons.verdict.label == "correct"),
            "edited_seconds": round(time.perf_counter() - started, 2)}


def run_questions(agent, chosen: list[tuple[dict, str]], rows_path: Path, progress: bool = True) -> list[dict]:
    rows_path.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if rows_path.exists():
        for line in rows_path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                done[row["id"]] = row
    for number, (record, bridge) in enumerate(chosen, 1):
        if record["id"] in done:
            continue
        row = ask_question(agent, record, bridge, number)
        with rows_path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        done[record["id"]] = row
        if progress:
            print(f"[{number}/{len(chosen)}] {record['id']}: {row['edit'] or 'no edit'}", file=sys.stderr, flush=True)
    return [done[record["id"]] for record, _ in chosen if record["id"] in done]


def table(rows: list[dict]) -> str:
    from backend.eval.significance import mcnemar_exact

    edited = [r for r in rows if r["edit"]]
    lines = [f"{len(rows)} train bridge questions; {len(edited)} plans edited by rule "
             f"({sum(r['edit'] == 'missing hop' for r in edited)} missing hop, "
             f"{sum(r['edit'] == 'first hop' for r in edited)} first hop reworded); "
             f"{len(rows) - len(edited)} needed no edit", "",
             "| plan | judge accuracy on the edited questions | mean s |", "|---|---|---|"]
    if edited:
        for key, label in (("planner", "the Planner's"), ("edited", "the person's edit, as written")):
            right = sum(r[f"{key}_right"] for r in edited)
            seconds = sum(r[f"{key}_seconds"] for r in edited) / len(edited)
            lines.append(f"| {label} | {right / len(edited):.1%} ({right}/{len(edited)}) | {seconds:.1f} |")
        became_right = sum(r["edited_right"] and not r["planner_right"] for r in edited)
        became_wrong = sum(r["planner_right"] and not r["edited_right"] for r in edited)
        lines += ["", f"Became right with the edit: {became_right}; became wrong: {became_wrong}; exact McNemar "
                      f"p = {mcnemar_exact(became_right, became_wrong):.3f}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=40, help="train bridge questions (default 40)")
    parser.add_argument("--config", help="TOML configuration (default: mia.toml)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"rows and runs (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    from backend.config import load_config
    from backend.eval.runner import open_eval_runtime

    runtime = open_eval_runtime(load_config(args.config), args.out)
    try:
        rows = run_questions(runtime.agent, questions(limit=args.limit), args.out / "rows.jsonl")
    finally:
        runtime.close()
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
