"""A published table recomputed from the rows committed beside it: `python -m backend.eval --table results/<table>`.

A table's folder under `results/` holds `table.json` (which rows files, in which order and under which
labels, cut to which N, and which columns the page shows) and each evaluation's `rows.jsonl`: the
rows only, byte for byte as the evaluation wrote them (no memory, no run logs). The output is the
table as the page prints it, then the sha256 of every rows file, so that a table edited by hand or
rows changed no longer match the page (tests/backend/eval/test_tables.py checks every table).
The cells come from the same code as `--summarize` and `--compare` (report.METRIC_COLUMNS,
compare.PAIRED_COLUMNS); the first evaluation is the reference of the paired columns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from backend.eval.compare import PAIRED_COLUMNS
from backend.eval.report import METRIC_COLUMNS, file_digest, markdown_header, markdown_row, rows_in_scope, summarize
from backend.eval.results import EvalRow, ResultsFile
from backend.eval.significance import PairedComparison, paired_comparison
from backend.eval.spec import EvalError

TABLE_SPEC = "table.json"
RESULTS_DIR = "results"
ROWS_DIGEST = "rows sha256"  # a column: the first 16 hex digits of the row's rows file
_COLUMNS = (*METRIC_COLUMNS, *PAIRED_COLUMNS, ROWS_DIGEST)
_NOT_PAIRED = "–"  # the reference's own cell in a paired column


@dataclass(frozen=True)
class Column:
    key: str  # which cell (a key of _COLUMNS)
    header: str  # what the page calls it


@dataclass(frozen=True)
class Evaluation:
    label: str
    rows: Path  # relative to the table's folder


@dataclass(frozen=True)
class TableSpec:
    published_in: str  # the page that prints the table, relative to the repository
    first_column: str
    columns: list[Column]
    evaluations: list[Evaluation]
    limit: int | None  # each evaluation cut to its first `limit` questions


def read_table_spec(folder: Path) -> TableSpec:
    path = Path(folder) / TABLE_SPEC
    if not path.is_file():
        raise EvalError(f"{path} does not exist: a published table's folder holds {TABLE_SPEC} beside its rows "
                        "(docs/evaluation.md, 'Tables and their rows').")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        columns = [Column(c, c) if isinstance(c, str) else Column(c["key"], c.get("header", c["key"]))
                   for c in data["columns"]]
        spec = TableSpec(
            published_in=data["published_in"],
            first_column=data.get("first_column", "evaluation"),
            columns=columns,
            evaluations=[Evaluation(e["label"], Path(e["rows"])) for e in data["evaluations"]],
            limit=data.get("limit"),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise EvalError(f"{path}: not a table description ({exc!r}); it needs published_in, columns and "
                        "evaluations [{label, rows}], and may set first_column and limit.") from None
    unknown = [c.key for c in spec.columns if c.key not in _COLUMNS]
    if unknown:
        raise EvalError(f"{path}: no such column {', '.join(map(repr, unknown))}; the columns are "
                        f"{', '.join(map(repr, _COLUMNS))} (a header may rename one: "
                        '{"key": ..., "header": ...}).')
    if not spec.evaluations:
        raise EvalError(f"{path}: evaluations is empty; a table needs at least one rows file.")
    return spec


def recompute_table(folder: Path) -> str:
    """The table's Markdown, then one line per rows file with its full sha256 and its number of rows."""
    folder = Path(folder)
    spec = read_table_spec(folder)
    read: list[tuple[Evaluation, list[EvalRow], int, str]] = []
    for evaluation in spec.evaluations:
        path = folder / evaluation.rows
        if not path.is_file():
            raise EvalError(f"{path} does not exist: {folder / TABLE_SPEC} names it for {evaluation.label!r}; "
                            "commit the rows file the table was computed from beside it.")
        rows = ResultsFile(path).read(repair=False)
        in_scope = rows_in_scope(rows, spec.limit)
        if not in_scope:
            raise EvalError(f"{path} holds no rows{f' among its first {spec.limit} questions' if spec.limit else ''}.")
        read.append((evaluation, in_scope, len(rows), file_digest(path)))
    reference = read[0][1]
    lines = [markdown_header([spec.first_column, *(c.header for c in spec.columns)])]
    for i, (evaluation, rows, _, digest) in enumerate(read):
        summary = summarize(rows)
        paired = paired_comparison(reference, rows) if i else None
        lines.append(markdown_row([evaluation.label, *(_cell(c.key, summary, paired, digest) for c in spec.columns)]))
    lines += ["", "Rows (sha256):", ""]
    lines += [f"- `{evaluation.rows.as_posix()}` `{digest}` ({count} row{'' if count == 1 else 's'})"
              for evaluation, _, count, digest in read]
    return "\n".join(lines) + "\n"


def _cell(key: str, summary: dict, paired: PairedComparison | None, digest: str) -> str:
    if key in METRIC_COLUMNS:
        return METRIC_COLUMNS[key](summary)
    if key in PAIRED_COLUMNS:
        return _NOT_PAIRED if paired is None else PAIRED_COLUMNS[key](paired)
    return f"`{digest[:16]}`"


def table_folders(repository: Path) -> list[Path]:
    """Every committed table's folder (results/<table>/ with a table.json)."""
    return sorted(p.parent for p in (Path(repository) / RESULTS_DIR).glob(f"*/{TABLE_SPEC}"))
