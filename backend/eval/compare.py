"""Side-by-side comparison of evaluation folders: a Markdown table and a learning-curve plot."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from backend.eval.report import METRICS_HEADER, file_digest, metrics_table_row, summarize, rows_in_scope
from backend.eval.results import ResultsFile
from backend.eval.spec import ROWS_FILE, EvalError, read_manifest

log = logging.getLogger(__name__)

COMPARE_MD = "compare.md"
CURVE_PNG = "learning_curve.png"


def compare(result_dirs: list[Path], out_dir: Path, *, limit: int | None = None) -> Path:
    """Write compare.md (and learning_curve.png when matplotlib is installed); returns the Markdown path.
    `limit` cuts every stream to its first questions, so that evaluations of different length compare fairly."""
    if not result_dirs:
        raise EvalError("--compare needs at least one evaluation folder.")
    entries = []
    for folder in map(Path, result_dirs):
        manifest = read_manifest(folder)
        rows = rows_in_scope(ResultsFile(folder / ROWS_FILE).read(), manifest["limit"])
        rows = rows[:limit] if limit else rows
        if not rows:
            raise EvalError(f"{folder} has no result rows yet; run the evaluation before comparing it.")
        entries.append((folder, manifest, summarize(rows)))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plotted = plot_learning_curves([(m["label"], s["learning_curve"]) for _, m, s in entries], out_dir / CURVE_PNG)
    cut = f" (each stream cut to its first {limit} questions)" if limit else ""
    lines = [f"# Comparison{cut}", "", METRICS_HEADER]
    lines += [metrics_table_row(m["label"], s) for _, m, s in entries]
    lines += ["", "Sources (each row of the table is computed from its folder's rows file):", ""]
    lines += [_source_line(folder, m, out_dir) for folder, m, _ in entries]
    lines += [""]
    if plotted:
        lines += [f"![accuracy over the stream]({CURVE_PNG})", ""]
    else:
        lines += ["(No plot: matplotlib is not installed; `pip install matplotlib==3.11.2` adds it.)", ""]
    path = out_dir / COMPARE_MD
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _source_line(folder: Path, manifest: dict, out_dir: Path) -> str:
    """Where a table row comes from: its rows file, linked relative to the report so that the link
    survives a move, with the file's digest."""
    rows = folder / ROWS_FILE
    link = Path(os.path.relpath(rows.resolve(), out_dir.resolve())).as_posix()
    return (
        f"- {manifest['label']}: [`{link}`]({link}) (sha256 `{file_digest(rows)[:16]}`), method "
        f"`{manifest['method']}`, data `{Path(manifest['data']).name}`, warm-up {_warm_up_text(manifest)}"
    )


def _warm_up_text(manifest: dict) -> str:
    if not manifest["warm_from"]:
        return "none"
    return f"`{Path(manifest['warm_from']).name}` ({manifest['warm_limit'] or 'all'} questions)"


def plot_learning_curves(curves: list[tuple[str, list[float]]], path: Path) -> bool:
    """Running accuracy against stream position, one line per evaluation; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed; the learning-curve plot is skipped")
        return False
    figure, axes = plt.subplots(figsize=(7, 4))
    for label, curve in curves:
        axes.plot(range(1, len(curve) + 1), curve, marker="o" if len(curve) <= 20 else None, label=label)
    axes.set_xlabel("questions answered")
    axes.set_ylabel("judge accuracy so far")
    axes.set_ylim(0, 1)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True
