"""Side-by-side comparison of evaluation folders: a Markdown table and a learning-curve plot."""

from __future__ import annotations

import itertools
import json
import logging
import os
from collections import defaultdict
from collections.abc import Callable, Collection
from pathlib import Path

from backend.eval.losses import CAUSES, HOP_CAUSES, LossBreakdown, loss_breakdown, read_labels
from backend.eval.metrics import rolling_accuracy, running_accuracy
from backend.eval.report import (METRICS_HEADER, file_digest, markdown_header, markdown_row, metrics_table_row,
                                 rows_in_scope, summarize, with_first_answer)
from backend.eval.results import EvalRow, ResultsFile
from backend.eval.significance import PairedComparison, paired_comparison, questions_needed
from backend.eval.spec import REMOVED_AGENT_SETTINGS, ROWS_FILE, EvalError, read_manifest

log = logging.getLogger(__name__)

COMPARE_MD = "compare.md"
CURVE_PNG = "learning_curve.png"
ROLLING_WINDOW = 20  # questions in the rolling accuracy of the plot's second panel
_SETTING_SECTIONS = ("agent", "search")  # the manifest's settings that name an evaluation apart


def compare(result_dirs: list[Path], out_dir: Path, *, limit: int | None = None,
            labels: list[Path] | None = None) -> Path:
    """Write compare.md (and learning_curve.png when matplotlib is installed); returns the Markdown path.
    `limit` cuts every stream to its first questions, so that evaluations of different length compare fairly.
    The first folder is the reference of the paired tests; `labels` (hand labels of answers) add the
    Judge's errors to the breakdown of misses."""
    if not result_dirs:
        raise EvalError("--compare needs at least one evaluation folder.")
    entries: list[tuple[Path, dict, dict, list[EvalRow]]] = []
    for folder in map(Path, result_dirs):
        manifest = read_manifest(folder)
        rows = rows_in_scope(ResultsFile(folder / ROWS_FILE).read(), manifest["limit"])
        rows = [with_first_answer(r, folder, manifest["namespace"]) for r in (rows[:limit] if limit else rows)]
        if not rows:
            raise EvalError(f"{folder} has no result rows yet; run the evaluation before comparing it.")
        entries.append((folder, manifest, summarize(rows), rows))
    for (folder, manifest, _, _), label in zip(entries, distinct_labels([(f, m) for f, m, _, _ in entries])):
        manifest["label"] = label
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plotted = plot_learning_curves([(m["label"], [r.correct for r in rows]) for _, m, _, rows in entries],
                                   out_dir / CURVE_PNG)
    cut = f" (each stream cut to its first {limit} questions)" if limit else ""
    lines = [f"# Comparison{cut}", "", METRICS_HEADER]
    lines += [metrics_table_row(m["label"], s) for _, m, s, _ in entries]
    if len(entries) > 1:
        lines += ["", *paired_table(entries)]
    hand_labels = read_labels(labels or [])
    lines += ["", *loss_table([(m["label"], loss_breakdown(folder, m, rows, hand_labels)) for folder, m, _, rows in entries],
                              labelled=bool(labels))]
    lines += ["", "Sources (each row of the table is computed from its folder's rows file):", ""]
    lines += [_source_line(folder, m, out_dir) for folder, m, _, _ in entries]
    lines += [""]
    if plotted:
        lines += [f"![accuracy over the stream]({CURVE_PNG})", ""]
    else:
        lines += ["(No plot: matplotlib is not installed; `pip install matplotlib==3.11.2` adds it.)", ""]
    path = out_dir / COMPARE_MD
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def distinct_labels(evaluations: list[tuple[Path, dict]]) -> list[str]:
    """How the report names each evaluation: its own label, plus each agent or search setting it ran
    with that differs from the first (the reference), so that two runs of one method apart only in a
    setting do not read alike; other folders whose labels are still alike get their folder's name.
    A removed variant's setting that a manifest does not name ran off (spec.REMOVED_AGENT_SETTINGS)."""

    def settings(manifest: dict, section: str) -> dict:
        return {**(REMOVED_AGENT_SETTINGS if section == "agent" else {}), **manifest.get(section, {})}

    reference = evaluations[0][1]
    labels = []
    for _, manifest in evaluations:
        differences = [
            f"{section}.{key} = {json.dumps(value)}"
            for section in _SETTING_SECTIONS
            for key, value in sorted(settings(manifest, section).items())
            if key in settings(reference, section) and settings(reference, section)[key] != value
        ]
        if manifest.get("models") != reference.get("models"):
            differences.append("other models")
        labels.append(manifest["label"] + (f" [{', '.join(differences)}]" if differences else ""))
    folders_by_label: dict[str, set[Path]] = defaultdict(set)
    for (folder, _), label in zip(evaluations, labels):
        folders_by_label[label].add(Path(folder).resolve())
    return [f"{label} ({folder.name})" if len(folders_by_label[label]) > 1 else label
            for (folder, _), label in zip(evaluations, labels)]


# Each column of a paired comparison: its header and its cell from a PairedComparison.
PAIRED_COLUMNS: dict[str, Callable[[PairedComparison], str]] = {
    "paired": lambda c: str(c.questions),
    "both right": lambda c: str(c.both_right),
    "only this": lambda c: str(c.only_this),
    "only the reference": lambda c: str(c.only_reference),
    "both / only this / only the reference": lambda c: f"{c.both_right} / {c.only_this} / {c.only_reference}",
    "difference": lambda c: f"{100 * c.difference:+.1f} pts",
    "95% interval": lambda c: f"{100 * c.interval[0]:+.1f} to {100 * c.interval[1]:+.1f}",
    "McNemar p": lambda c: f"{c.p_value:.3f}",
    "questions needed": lambda c: questions_needed(c.only_this, c.only_reference, c.questions),
}
_PAIRED_TABLE = ("paired", "both right", "only this", "only the reference", "difference", "95% interval", "McNemar p",
                 "questions needed")


def paired_table(entries: list[tuple[Path, dict, dict, list[EvalRow]]]) -> list[str]:
    """Each evaluation against the first, on the questions both answered."""
    reference_label, reference_rows = entries[0][1]["label"], entries[0][3]
    lines = [
        f"Paired against {reference_label} (questions matched by id; exact McNemar on the questions only one "
        "got right; 95% bootstrap interval of the difference, 10,000 resamples; questions needed: how many "
        "paired questions would find a gain this large with 80% power at p < 0.05, none where it is not ahead):",
        "",
        markdown_header(["evaluation", *_PAIRED_TABLE]),
    ]
    for _, manifest, _, rows in entries[1:]:
        c = paired_comparison(reference_rows, rows)
        lines.append(markdown_row([manifest["label"], *(PAIRED_COLUMNS[name](c) for name in _PAIRED_TABLE)]))
    return lines


def loss_table(breakdowns: list[tuple[str, LossBreakdown]], *, labelled: bool) -> list[str]:
    """Where each evaluation's misses are lost (backend.eval.losses), as counts of its misses."""
    causes = [c for c in CAUSES if any(b.causes[c] for _, b in breakdowns)]
    header = ["evaluation", "misses", *causes, "gold answer in the results", "every gold paragraph retrieved"]
    if labelled:
        header.append("passes a hand label calls wrong")
    lines = [
        "Where the misses are lost (one cause per miss; the last columns count misses with gold retrieved):",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for label, b in breakdowns:
        cells = [label, str(b.misses), *(str(b.causes[c]) for c in causes), str(b.answer_in_results),
                 str(b.all_gold_retrieved)]
        if labelled:
            cells.append(f"{b.false_passes} of {b.labelled_passes} labelled")
        lines.append("| " + " | ".join(cells) + " |")
    by_hop = [(label, b) for label, b in breakdowns if b.hop_causes]
    if by_hop:
        lines += ["", "Misses on questions of two supporting pages, by the hop that went wrong (a bridge question names"
                      " one page and not the bridge, whose paragraph states the answer):", "",
                  "| evaluation | " + " | ".join(HOP_CAUSES) + " |", "|" + "---|" * (len(HOP_CAUSES) + 1)]
        lines += ["| " + " | ".join([label, *(str(b.hop_causes[c]) for c in HOP_CAUSES)]) + " |" for label, b in by_hop]
    return lines


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
    if manifest.get("memory_from"):
        return f"the memory of `{Path(manifest['memory_from']).name}`"
    if not manifest["warm_from"]:
        return "none"
    return f"`{Path(manifest['warm_from']).name}` ({manifest['warm_limit'] or 'all'} questions)"


def plot_learning_curves(streams: list[tuple[str, list[bool]]], path: Path, *, dashed: Collection[str] = ()) -> bool:
    """Accuracy against stream position, one line per evaluation: so far (left) and over the last
    ROLLING_WINDOW questions (right), the legend below both; the `dashed` labels (a bound, not a
    method) drawn dashed. False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed; the learning-curve plot is skipped")
        return False
    figure, (so_far, rolling) = plt.subplots(1, 2, figsize=(11, 4.6), sharey=True)
    colors = plt.get_cmap("tab10" if len(streams) <= 10 else "tab20").colors
    for i, ((label, correct), color) in enumerate(zip(streams, itertools.cycle(colors))):
        # Earlier lines wider, so a line that another one covers (the same answers) still shows at its edges.
        width = 1.2 + 2.4 * (len(streams) - 1 - i) / max(len(streams) - 1, 1)
        style = dict(color=color, label=label, marker="o" if len(correct) <= 20 else None,
                     linestyle="--" if label in dashed else "-", linewidth=width)
        so_far.plot(range(1, len(correct) + 1), running_accuracy(correct), **style)
        window = rolling_accuracy(correct, ROLLING_WINDOW)
        rolling.plot(range(len(correct) - len(window) + 1, len(correct) + 1), window, **style)
    so_far.set_ylabel("judge accuracy")
    so_far.set_title("so far")
    rolling.set_title(f"last {ROLLING_WINDOW} questions")
    for axes in (so_far, rolling):
        axes.set_xlabel("questions answered")
        axes.set_ylim(0, 1)
        axes.grid(alpha=0.3)
    figure.legend(*so_far.get_legend_handles_labels(), loc="lower center", ncol=min(len(streams), 3), frameon=False)
    figure.tight_layout(rect=(0, 0.06 * ((len(streams) + 2) // 3) + 0.02, 1, 1))
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True
