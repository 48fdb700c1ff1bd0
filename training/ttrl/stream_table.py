"""The test-time learning stream's table: reported-answer accuracy per variant, paired per question.

Each stream folder is the data folder a `python -m training ttrl --data ... --data-dir DIR` run
learned in (its `ttrl/signals.jsonl` holds, per question, the reported answer and whether the ground
truth called it right, every rollout's answer and reward, and the Planner version; `ttrl/versions/`
the updates and canary decisions). Evaluation folders of `python -m backend.eval` (the `none` and
one-rollout `mia` rows) join by question id; `--limit N` cuts every folder to its first N questions:
an evaluation that ran further than the stream (the 300-question `dev` table's folders beside a
150-question stream), and a stream that went on into the next round (with the updates made before
its next question was reported).
A stream whose rows record every way of selecting (`selected`) gets a row for each other way on the
same rollouts, and one for the questions where any rollout was right (a bound no selection exceeds).
Usage:

    python -m training.ttrl.stream_table --reference k4-none DIR... --out TABLE_DIR [--limit N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from backend.eval.compare import plot_learning_curves
from backend.eval.report import file_digest, rows_in_scope
from backend.eval.results import ResultsFile
from backend.eval.significance import bootstrap_interval, mcnemar_exact, questions_needed

STREAM_PREFIX = "stream:"
ANY_RIGHT = "any rollout right (ground truth; a bound)"
PEAK_FILE = "peak_rss_kb.txt"  # one line per run of the stream: its peak resident set in kB (GNU time's %M)


@dataclass
class Variant:
    label: str
    correct: dict[str, bool]  # question id -> the reported answer was right, in stream order
    seconds_per_signal: float | None = None
    updates: int = 0
    promoted: int = 0
    seconds_per_update: float | None = None
    rewards_per_update: list[float] | None = None
    digest: str = ""
    peak_gb: float | None = None  # the stream process's peak resident memory over its runs (PEAK_FILE)


def bound_label(label: str) -> str:
    """The row of a stream's questions where any rollout was right (other_selections)."""
    return f"{label}, {ANY_RIGHT}"


def _digest(path: Path) -> str:
    return file_digest(path)[:16] or "-"


def read_stream(folder: Path, label: str, limit: int | None = None) -> tuple[Variant, list[dict]]:
    """A stream's row and its signals, perhaps its first `limit` questions: then only the updates made
    before the next question was reported count, and the checksum is of the lines those questions
    take in the rows file (what a round's table computed from, however far the stream has gone on)."""
    signals = folder / "ttrl" / "signals.jsonl"
    data = signals.read_bytes()
    every, ends = [], []  # a stream question's row, and where its line ends in the file
    offset = 0
    for line in data.splitlines(keepends=True):
        offset += len(line)
        row = json.loads(line) if line.strip() else {}
        if str(row.get("source", "")).startswith(STREAM_PREFIX) and row.get("reported_correct") is not None:
            every.append(row)
            ends.append(offset)
    rows = every[:limit]
    until = every[len(rows)].get("at") if len(every) > len(rows) else None
    in_scope = data if limit is None else data[:ends[len(rows) - 1] if rows else 0]
    versions = []
    for meta in sorted((folder / "ttrl" / "versions").glob("v*/meta.json")):
        versions.append(json.loads(meta.read_text(encoding="utf-8")))
    updates = [v for v in versions if v.get("number", 0) > 0 and (until is None or v.get("created", 0.0) < until)]
    return Variant(
        label=label,
        correct={r["source"][len(STREAM_PREFIX):]: bool(r["reported_correct"]) for r in rows},
        seconds_per_signal=sum(r.get("seconds", 0.0) for r in rows) / len(rows) if rows else None,
        updates=len(updates), promoted=sum(v.get("status") == "promoted" for v in updates),
        seconds_per_update=(sum(v.get("update_seconds", 0.0) + v.get("canary_seconds", 0.0) for v in updates)
                            / len(updates)) if updates else None,
        rewards_per_update=[v["train_reward"] for v in updates if v.get("train_reward") is not None],
        digest=hashlib.sha256(in_scope).hexdigest()[:16] if in_scope else "-",
        peak_gb=_peak_gb(folder / PEAK_FILE),
    ), rows


def other_selections(rows: list[dict], label: str, digest: str) -> list[Variant]:
    """The same rollouts reported another way (a row's "selected": every way of selecting, paired on the
    same questions; training.ttrl.selection), and the best of each question's rollouts, which needs the
    ground truth: how much any selection could gain. `digest`: the rows file's."""
    ways = [how for how in dict.fromkeys(how for r in rows for how in r.get("selected", {}))
            if any(r.get("selection") != how for r in rows)]
    variants = []
    for how in ways:
        picked = {r["source"][len(STREAM_PREFIX):]: bool(r["selected"][how]["correct"])
                  for r in rows if r.get("selected", {}).get(how, {}).get("correct") is not None}
        if picked:
            variants.append(Variant(label=f"{label}, reported by {how}", correct=picked, digest=digest))
    if rows and all("correct" in r for r in rows):
        variants.append(Variant(label=bound_label(label),
                                correct={r["source"][len(STREAM_PREFIX):]: r["correct"] > 0 for r in rows}, digest=digest))
    return variants


def _peak_gb(path: Path) -> float | None:
    if not path.is_file():
        return None
    peaks = [int(line) for line in path.read_text(encoding="utf-8").split() if line.isdigit()]
    return max(peaks) / 1e6 if peaks else None


def read_evaluation(folder: Path, label: str, limit: int | None = None) -> Variant:
    rows = rows_in_scope(ResultsFile(folder / "rows.jsonl").read(), limit)
    return Variant(label=label, correct={row.id: row.correct for row in rows},
                   seconds_per_signal=sum(row.wall_seconds for row in rows) / len(rows) if rows else None,
                   digest=_digest(folder / "rows.jsonl"))


def read_variants(folder: Path, limit: int | None = None) -> list[Variant]:
    """An evaluation's row, or a stream's with its other selections after it."""
    label = folder.name
    if (folder / "rows.jsonl").is_file():
        return [read_evaluation(folder, label, limit)]
    stream, rows = read_stream(folder, label, limit)
    return [stream, *other_selections(rows, label, stream.digest)]


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def table(variants: list[Variant], reference: Variant) -> list[str]:
    lines = [
        f"Paired against {reference.label} by question id: exact McNemar on the questions only one of the two "
        "got right, 95% bootstrap interval of the accuracy difference. \"Questions needed\": how long a stream "
        "must be for McNemar to find a gain as large as this one with 80% power at p < 0.05 (Connor 1987; "
        "none where the variant is not ahead).",
        "",
        "| variant | N | reported right | vs reference | 95% interval | McNemar p | questions needed | s/signal "
        "| updates (promoted) | s/update | peak GB | rows sha256 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in variants:
        shared = [q for q in v.correct if q in reference.correct]
        accuracy = sum(v.correct.values()) / len(v.correct) if v.correct else 0.0
        if v is reference or not shared:
            versus, interval, p, needed = "-", "-", "-", "-"
        else:
            differences = [int(v.correct[q]) - int(reference.correct[q]) for q in shared]
            low, high = bootstrap_interval(differences)
            only_this = sum(d > 0 for d in differences)
            only_reference = sum(d < 0 for d in differences)
            versus = f"{100 * sum(differences) / len(shared):+.1f} pts ({len(shared)} paired)"
            interval = f"[{100 * low:+.1f}, {100 * high:+.1f}]"
            p = f"{mcnemar_exact(only_this, only_reference):.3f}"
            needed = questions_needed(only_this, only_reference, len(shared))
        per_signal = f"{v.seconds_per_signal:.0f}" if v.seconds_per_signal is not None else "-"
        per_update = f"{v.seconds_per_update:.0f}" if v.seconds_per_update is not None else "-"
        peak = f"{v.peak_gb:.2f}" if v.peak_gb is not None else "-"
        lines.append(f"| {v.label} | {len(v.correct)} | {_percent(accuracy)} | {versus} | {interval} | {p} | {needed} | "
                     f"{per_signal} | {v.updates} ({v.promoted}) | {per_update} | {peak} | `{v.digest}` |")
    rewards = [v for v in variants if v.rewards_per_update]
    if rewards:
        lines += ["", "Mean rollout reward of each update's batch:", ""]
        lines += [f"- {v.label}: {', '.join(f'{r:.2f}' for r in v.rewards_per_update)}" for v in rewards]
    return lines


def plotted(variants: list[Variant], reference_label: str) -> list[Variant]:
    """What the stream's plot draws: each method's reported answers and the reference's any-rollout-right
    bound; the other selections of the same rollouts are in the table only."""
    return [v for v in variants if ", " not in v.label or v.label == bound_label(reference_label)]


def write_table(folders: list[Path], reference_label: str, out_dir: Path, limit: int | None = None) -> Path:
    variants = [variant for folder in folders for variant in read_variants(folder, limit)]
    by_label = {v.label: v for v in variants}
    if reference_label not in by_label:
        raise ValueError(f"--reference {reference_label!r} is none of the folders' names: {', '.join(by_label)}.")
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# Test-time learning stream", ""] + table(variants, by_label[reference_label])
    if plot_learning_curves([(v.label, list(v.correct.values())) for v in plotted(variants, reference_label)],
                            out_dir / "stream.png", dashed={bound_label(reference_label)}):
        lines += ["", "![reported-answer accuracy over the stream](stream.png)"]
    path = out_dir / "stream.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the test-time learning stream's table")
    parser.add_argument("folders", type=Path, nargs="+", help="stream data folders and evaluation folders")
    parser.add_argument("--reference", required=True, help="the folder name the others are paired against")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, help="cut every folder to its first N questions (a round's table)")
    args = parser.parse_args(argv)
    path = write_table(args.folders, args.reference, args.out, args.limit)
    print(path.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
