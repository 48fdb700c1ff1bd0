"""Answers of the wrong kind (backend.answer_kind), before and after the check, from rows already made:
an evaluation folder's rows (backend/eval: rows.jsonl) or a JSONL file of {"question", "answer",
"gold"} rows. No model is run: "before" is what the rows gave as the answer; "after" is what the
check lets through as an answer (a wrong answer of the wrong kind is withheld, so it no longer counts
as given) and what it would withhold wrongly (a right answer the check calls another kind).

    .venv/bin/python benchmarks/answer_kind_bench.py .mia/plan-shapes/dev-hybrid/subq-mia
    .venv/bin/python benchmarks/answer_kind_bench.py rows.jsonl --list
    .venv/bin/python benchmarks/answer_kind_bench.py --examples     # the issue's three found answers
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.answer_kind import kind_problem  # noqa: E402
from backend.question import Question  # noqa: E402
from backend.answer_match import same_answer_contained  # noqa: E402

EXAMPLES = [  # found on the default model (issue 65)
    {"question": "In which country was the director of the film Jaws born?", "answer": "Pennsylvania",
     "gold": "United States"},
    {"question": "In which country was the director of the film Jaws 2 born?", "answer": "California",
     "gold": "United States"},
    {"question": "What is the capital of the country whose flag is shown in the image?", "answer": "Moldova",
     "gold": "Bucharest"},
]


def read_rows(path: Path) -> list[dict]:
    """(question, answer, gold, right) rows of an evaluation folder or a JSONL file; `right` is the row's
    verdict where it has one, else whether the answer holds the gold one."""
    if path.is_dir():
        from backend.eval.results import ResultsFile
        from backend.eval.spec import ROWS_FILE

        return [{"question": r.question, "answer": r.answer, "gold": r.gold, "right": r.correct}
                for r in ResultsFile(path / ROWS_FILE).read()]
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        missing = [k for k in ("question", "answer", "gold") if not isinstance(row.get(k), str)]
        if missing:
            raise SystemExit(f"{path}:{number}: the row has no text for {', '.join(missing)}; give question, answer "
                             "and gold as strings.")
        rows.append({**row, "right": bool(row.get("correct", same_answer_contained(row["answer"], row["gold"])))})
    return rows


def measure(rows: list[dict]) -> dict:
    wrong = [r for r in rows if not r["right"]]
    asked = {id(r): Question.parse(r["question"]) for r in rows}
    wrong_kind = [(r, kind_problem(asked[id(r)], r["answer"])) for r in wrong]
    wrong_kind = [(r, p) for r, p in wrong_kind if p]
    refused = [(r, kind_problem(asked[id(r)], r["answer"])) for r in rows if r["right"]]
    refused = [(r, p) for r, p in refused if p]
    return {"rows": len(rows), "asked": sum(asked[id(r)].kind is not None for r in rows),
            "wrong": len(wrong), "wrong_kind": wrong_kind, "refused": refused}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rows", nargs="?", type=Path, help="an evaluation folder, or a JSONL file of rows")
    parser.add_argument("--examples", action="store_true", help="the issue's three found answers")
    parser.add_argument("--list", action="store_true", help="list every answer the check withholds")
    args = parser.parse_args()
    if not args.examples and args.rows is None:
        parser.error("name an evaluation folder or a rows file, or pass --examples")
    rows = [{**r, "right": False} for r in EXAMPLES] if args.examples else read_rows(args.rows)
    m = measure(rows)
    kinds = Counter(p.rsplit("; not ", 1)[1] for _, p in m["wrong_kind"])
    print(f"| rows | kind asked known | wrong answers | wrong, of the wrong kind: given before | given after "
          f"| right answers withheld after |")
    print("|---|---|---|---|---|---|")
    print(f"| {m['rows']} | {m['asked']} | {m['wrong']} | {len(m['wrong_kind'])} | 0 | {len(m['refused'])} |")
    if kinds:
        print("\nWrong answers of the wrong kind, by the kind asked: "
              + ", ".join(f"{kind} {n}" for kind, n in kinds.most_common()))
    if args.list or args.examples:
        for title, found in (("withheld, wrong", m["wrong_kind"]), ("withheld, though right", m["refused"])):
            for row, problem in found:
                print(f"- {title}: {row['question']} → {row['answer']!r} (gold {row['gold']!r}): {problem}")


if __name__ == "__main__":
    main()
