"""How the relevance floor (agent.min_memory_similarity) trades unrelated memories against related ones.

For each question of a HotpotQA-style file, its 3 most similar other questions (MiniLM cosine, as the
memory store ranks them) stand in for the memories it would be shown. A pair is *related* when the two
questions share a capitalised name (an entity); the table shows, per floor, how many pairs would still
be shown, how many of those share no entity, and how many related pairs the floor would hide.

Usage: .venv/bin/python benchmarks/memory_relevance.py [--data data/hotpotqa/train.jsonl]
       .venv/bin/python benchmarks/memory_relevance.py --eval-dir .mia/eval/qwen-mia
Tune the floor on `train`; `dev` is for reporting. With --eval-dir: what the runs of an evaluation
were actually shown (from their run logs): how many got a memory, and how often the top memory's
question shares no entity with the run's.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from backend.config import REPO_ROOT  # noqa: E402

QUESTION_WORDS = {"what", "which", "who", "whom", "whose", "when", "where", "how", "why", "is", "are", "was", "were",
                  "the", "in", "did", "does", "do", "name", "between", "among", "both"}


def entities(question: str) -> set[str]:
    return {w.lower() for w in re.findall(r"\b[A-Z][\w'’-]+", question)} - QUESTION_WORDS


def report_shown(eval_dir: Path) -> int:
    runs = shown = unrelated = 0
    for log in sorted(eval_dir.glob("runs/*/*.jsonl")):
        events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]
        question = next((e["question"] for e in events if e["kind"] == "run_started"), "")
        retrieved = next((e for e in events if e["kind"] == "memories"), None)
        if not question or retrieved is None:
            continue
        runs += 1
        memories = retrieved["successful"] + retrieved["failed"]
        if memories:
            shown += 1
            top = max(memories, key=lambda m: m["score"])
            unrelated += not (entities(question) & entities(top["question"]))
    print("| evaluation | runs | shown a memory | top memory shares no entity |\n|---|---|---|---|")
    print(f"| {eval_dir.name} | {runs} | {shown} | {unrelated} ({unrelated / max(shown, 1):.0%}) |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO_ROOT / "data" / "hotpotqa" / "train.jsonl")
    parser.add_argument("--neighbours", type=int, default=3)
    parser.add_argument("--eval-dir", type=Path, help="report the memories an evaluation's runs were shown")
    args = parser.parse_args(argv)
    if args.eval_dir:
        return report_shown(args.eval_dir)
    from memory_db.embedder import get_embedder

    questions = [json.loads(line)["question"] for line in args.data.read_text(encoding="utf-8").splitlines() if line]
    vectors = get_embedder().encode(questions)
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -1.0)
    pairs = []
    for i, question in enumerate(questions):
        for j in np.argsort(-similarity[i])[: args.neighbours]:
            pairs.append((float(similarity[i, j]), bool(entities(question) & entities(questions[j]))))
    scores = np.array([p[0] for p in pairs])
    related = np.array([p[1] for p in pairs])
    print(f"{len(questions)} questions of {args.data.name}, {args.neighbours} nearest each: {len(pairs)} pairs, "
          f"{int(related.sum())} share an entity\n")
    print("| floor | pairs shown | shown, sharing no entity | related pairs hidden |")
    print("|---|---|---|---|")
    for floor in (None, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5):
        shown = np.ones_like(related) if floor is None else scores >= floor
        print(f"| {'none' if floor is None else floor} | {int(shown.sum())} | {int((shown & ~related).sum())} "
              f"({(shown & ~related).sum() / max(shown.sum(), 1):.0%}) | {int((~shown & related).sum())} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
