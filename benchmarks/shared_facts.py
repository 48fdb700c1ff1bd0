"""How much one set of HotpotQA questions can teach another by facts alone: how many questions of
the later set rest on a supporting page of the earlier set, or have an earlier question's answer as
theirs. A memory of the earlier questions (a warm-up, a person's corrections) can carry a fact to
a later question only through such an overlap; without one, what transfers is how to research.
With one set, a stream: each question against the ones before it (an evaluation that stores its
memories as it goes, the test-time learning stream).

    .venv/bin/python benchmarks/shared_facts.py data/hotpotqa/dev.jsonl:0:100 data/hotpotqa/dev.jsonl:100:200
    .venv/bin/python benchmarks/shared_facts.py data/hotpotqa/train.jsonl:0:100 data/hotpotqa/dev.jsonl:0:100
    .venv/bin/python benchmarks/shared_facts.py data/hotpotqa/dev.jsonl:0:300
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.answer_match import normalize_answer  # noqa: E402

CLOSED = {"yes", "no"}


def question_slice(spec: str) -> list[dict]:
    """FILE:START:END, the questions START..END-1 of a JSONL question file, in file order."""
    path, start, end = spec.rsplit(":", 2)
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()][int(start):int(end)]


def supporting_pages(question: dict) -> set[str]:
    return set((question.get("supporting_facts") or {}).get("title") or [])


def overlap(earlier: list[dict], later: list[dict]) -> dict[str, int]:
    pages = set().union(*(supporting_pages(q) for q in earlier)) if earlier else set()
    answers = {normalize_answer(q["answer"]) for q in earlier} - CLOSED
    sharing_page = [q for q in later if supporting_pages(q) & pages]
    sharing_answer = [q for q in later if normalize_answer(q["answer"]) in answers]
    either = {q["id"] for q in sharing_page} | {q["id"] for q in sharing_answer}
    return {"later questions": len(later), "resting on an earlier supporting page": len(sharing_page),
            "with an earlier open answer as theirs": len(sharing_answer), "either": len(either)}


def stream_overlap(stream: list[dict]) -> dict[str, int]:
    """Each question against the questions before it in the stream, summed."""
    totals: dict[str, int] = {}
    for position, question in enumerate(stream):
        for key, value in overlap(stream[:position], [question]).items():
            totals[key] = totals.get(key, 0) + value
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("earlier", help="FILE:START:END, the questions memory was made from (alone: a stream)")
    parser.add_argument("later", nargs="?", help="FILE:START:END, the questions asked after them")
    args = parser.parse_args(argv)
    if args.later:
        counts, later = overlap(question_slice(args.earlier), question_slice(args.later)), args.later
    else:
        counts, later = stream_overlap(question_slice(args.earlier)), "each after the ones before it"
    print(f"| earlier | later | {' | '.join(counts)} |")
    print("|---|---|" + "---|" * len(counts))
    print(f"| {args.earlier} | {later} | {' | '.join(str(v) for v in counts.values())} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
