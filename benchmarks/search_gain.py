"""Where a variant's gain goes under other search: given a baseline and a variant evaluated with one
search (say BM25 alone) and the same two with another (hybrid), which questions the variant answers
right that its baseline misses under the first search, how the second search's runs answered those,
and how many of each question's supporting pages every run's searches returned.

    .venv/bin/python benchmarks/search_gain.py \\
        --first .mia/s54/bm25-train/none .mia/s54/bm25-train/mia \\
        --second .mia/s51/select/train-24-llamacpp/none .mia/s51/select/train-24-llamacpp/mia --limit 40
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.eval.losses import run_retrieval, supporting_titles  # noqa: E402
from backend.eval.report import rows_in_scope  # noqa: E402
from backend.eval.results import EvalRow, ResultsFile  # noqa: E402
from backend.eval.spec import ROWS_FILE, read_manifest  # noqa: E402


class Evaluation:
    """One evaluation folder's rows by question id, and how many supporting pages each run retrieved."""

    def __init__(self, folder: Path, limit: int | None):
        self.folder = Path(folder)
        self.manifest = read_manifest(self.folder)
        rows = rows_in_scope(ResultsFile(self.folder / ROWS_FILE).read(), self.manifest["limit"])
        self.rows: dict[str, EvalRow] = {r.id: r for r in (rows[:limit] if limit else rows)}
        gold = supporting_titles(self.manifest["data"])
        self._pages = {qid: self._pages_retrieved(row, gold.get(qid)) for qid, row in self.rows.items()}

    def gold_pages_retrieved(self, question_id: str) -> int | None:
        """How many of the question's supporting pages the run's searches returned; None without a log."""
        return self._pages[question_id]

    def _pages_retrieved(self, row: EvalRow, gold: frozenset[str] | None) -> int | None:
        retrieval = run_retrieval(self.folder, self.manifest["namespace"], row.run_id) if row.run_id else None
        return None if retrieval is None or gold is None else len(gold & retrieval.titles)


def gain_report(first: tuple[Evaluation, Evaluation], second: tuple[Evaluation, Evaluation],
                names: tuple[str, str]) -> list[str]:
    (base_a, variant_a), (base_b, variant_b) = first, second
    shared = sorted(set(base_a.rows) & set(variant_a.rows) & set(base_b.rows) & set(variant_b.rows),
                    key=lambda q: base_a.rows[q].index)
    search_a, search_b = names
    columns = [(f"baseline, {search_a}", base_a), (f"variant, {search_a}", variant_a),
               (f"baseline, {search_b}", base_b), (f"variant, {search_b}", variant_b)]

    def right(evaluation: Evaluation, qid: str) -> bool:
        return evaluation.rows[qid].correct

    gained = [q for q in shared if right(variant_a, q) and not right(base_a, q)]
    lost = [q for q in shared if right(base_a, q) and not right(variant_a, q)]
    lines = [f"{len(shared)} questions in all four evaluations.", "",
             f"## The variant's gains and losses with {search_a}, and the same questions with {search_b}", "",
             "| questions | N | " + " | ".join(f"right: {label}" for label, _ in columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for label, group in ((f"variant right, baseline wrong ({search_a})", gained),
                         (f"baseline right, variant wrong ({search_a})", lost),
                         ("all", shared)):
        cells = [str(sum(right(e, q) for q in group)) for _, e in columns]
        lines.append(f"| {label} | {len(group)} | " + " | ".join(cells) + " |")
    lines += ["", "## Supporting pages the run's searches returned (questions by count: none / one / both)", "",
              "| questions | " + " | ".join(label for label, _ in columns) + " |",
              "|---|" + "---|" * len(columns)]
    for label, group in ((f"variant right, baseline wrong ({search_a})", gained), ("all", shared)):
        lines.append(f"| {label} | " + " | ".join(_page_counts(e, group) for _, e in columns) + " |")
    lines += ["", f"## Each question the variant gains with {search_a}", "",
              "| # | question | " + " | ".join(label for label, _ in columns) + " |",
              "|---|---|" + "---|" * len(columns)]
    for qid in gained:
        cells = []
        for _, evaluation in columns:
            pages = evaluation.gold_pages_retrieved(qid)
            mark = "right" if right(evaluation, qid) else "wrong"
            cells.append(mark if pages is None else f"{mark}, {pages} page{'' if pages == 1 else 's'}")
        question = base_a.rows[qid].question.replace("|", "/")
        lines.append(f"| {base_a.rows[qid].index + 1} | {question} | " + " | ".join(cells) + " |")
    return lines


def _page_counts(evaluation: Evaluation, question_ids: list[str]) -> str:
    counts = [evaluation.gold_pages_retrieved(q) for q in question_ids]
    known = [c for c in counts if c is not None]
    if not known:
        return "not logged"
    spread = " / ".join(str(sum(min(c, 2) == n for c in known)) for n in (0, 1, 2))
    return spread + (f" ({len(counts) - len(known)} not logged)" if len(known) < len(counts) else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--first", nargs=2, required=True, metavar=("BASELINE", "VARIANT"),
                        help="the two evaluation folders under the search where the variant gains")
    parser.add_argument("--second", nargs=2, required=True, metavar=("BASELINE", "VARIANT"),
                        help="the same two evaluations under the other search")
    parser.add_argument("--names", nargs=2, default=("BM25 alone", "hybrid"), metavar=("FIRST", "SECOND"),
                        help="what to call the two searches in the report")
    parser.add_argument("--limit", type=int, help="compare only each evaluation's first questions")
    args = parser.parse_args(argv)
    first = tuple(Evaluation(Path(f), args.limit) for f in args.first)
    second = tuple(Evaluation(Path(f), args.limit) for f in args.second)
    print("\n".join(gain_report(first, second, tuple(args.names))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
