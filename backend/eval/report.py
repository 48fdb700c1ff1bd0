"""Summaries of one evaluation (JSON + Markdown), computed from its rows file alone.

Every number names where it comes from: the rows file and its SHA-256 are written beside it,
and the Markdown lists each question's row so any aggregate can be recomputed by hand.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from backend.code_identity import describe
from backend.eval.metrics import mean, percentile, running_accuracy
from backend.eval.results import EvalRow, ResultsFile
from backend.eval.spec import ROWS_FILE, WARM_ROWS_FILE, logged_events, read_manifest
from backend.replay import replay

SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
OVERHEAD_TARGET = 0.05  # framework overhead should stay under 5% of wall time


def _round(value: float, digits: int = 4) -> float:
    return round(value, digits) if value == value else value  # NaN stays NaN


def summarize(rows: list[EvalRow]) -> dict:
    """The metrics of a stream of rows (in stream order)."""
    n = len(rows)
    completed = [r for r in rows if r.error is None]  # failed runs have no time split
    wall = sum(r.wall_seconds for r in completed)
    llm = sum(r.llm_seconds for r in completed)
    tool = sum(r.tool_seconds for r in completed)
    other = sum(r.other_seconds for r in completed)
    return {
        "questions": n,
        "correct": sum(r.correct for r in rows),
        "accuracy": _round(mean([float(r.correct) for r in rows])),
        "exact_match": _round(mean([r.em for r in rows])),
        "f1": _round(mean([r.f1 for r in rows])),
        "verdicts": dict(Counter(r.verdict for r in rows)),
        "failed_runs": n - len(completed),
        "forced_answers": sum(r.forced_answer for r in rows),
        "forced_reasons": dict(Counter(r.forced_reason for r in rows if r.forced_answer)),
        "latency_p50_s": _round(percentile([r.wall_seconds for r in rows], 50), 3),
        "latency_p95_s": _round(percentile([r.wall_seconds for r in rows], 95), 3),
        "first_answer_p50_s": _round(percentile(
            [r.first_answer_seconds for r in rows if r.first_answer_seconds is not None], 50), 3),
        "per_question": {
            "llm_calls": _round(mean([r.llm_calls for r in rows]), 2),
            "prompt_tokens": _round(mean([r.prompt_tokens for r in rows]), 1),
            "completion_tokens": _round(mean([r.completion_tokens for r in rows]), 1),
            "cached_prompt_tokens": _round(mean([r.cached_prompt_tokens for r in rows]), 1),
            "tool_calls": _round(mean([r.tool_calls for r in rows]), 2),
            "memories_used": _round(mean([r.memories_used for r in rows]), 2),
        },
        "time_split": {
            "runs": len(completed),
            "wall_s": round(wall, 3),
            "llm_s": round(llm, 3),
            "tool_s": round(tool, 3),
            "other_s": round(other, 3),
            "harness_s": round(sum(r.harness_seconds for r in completed), 3),
            "overhead_share": _round(other / wall) if wall else float("nan"),
            "overhead_target": OVERHEAD_TARGET,
        },
        "learning_curve": [_round(v) for v in running_accuracy([r.correct for r in rows])],
    }


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def _pct(value: float) -> str:
    return "n/a" if value != value else f"{100 * value:.1f}%"


# Each column of a metrics table: its header and its cell from a summary (summarize). A published table
# names the columns it shows (backend.eval.table); --summarize and --compare show them all.
METRIC_COLUMNS: dict[str, Callable[[dict], str]] = {
    "N": lambda s: str(s["questions"]),
    "judge accuracy": lambda s: _pct(s["accuracy"]),
    "EM": lambda s: _pct(s["exact_match"]),
    "F1": lambda s: _pct(s["f1"]),
    "p50 s": lambda s: f"{s['latency_p50_s']:.1f}",
    "p95 s": lambda s: f"{s['latency_p95_s']:.1f}",
    "first answer p50 s": lambda s: f"{s['first_answer_p50_s']:.1f}",
    "LLM calls/q": lambda s: f"{s['per_question']['llm_calls']:.1f}",
    "tokens/q": lambda s: f"{s['per_question']['prompt_tokens'] + s['per_question']['completion_tokens']:.0f}",
    "tool calls/q": lambda s: f"{s['per_question']['tool_calls']:.1f}",
    "memories/q": lambda s: f"{s['per_question']['memories_used']:.1f}",
    "overhead": lambda s: _pct(s["time_split"]["overhead_share"]),
}


def markdown_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown_header(columns: list[str]) -> str:
    return markdown_row(columns) + "\n|" + "---|" * len(columns)


def metrics_table_row(label: str, s: dict, columns: Sequence[str] = tuple(METRIC_COLUMNS)) -> str:
    return markdown_row([label, *(METRIC_COLUMNS[c](s) for c in columns)])


METRICS_HEADER = markdown_header(["evaluation", *METRIC_COLUMNS])


def code_line(manifest: dict) -> str:
    """Which code wrote the rows, and from which row other code resumed them."""
    first = manifest.get("code")
    text = f"Code: {describe(first)}" if first else "Code: not recorded (written before evaluations recorded it)"
    for resumed in manifest.get("code_resumed") or []:
        text += f"; from row {resumed['rows_before'] + 1}: {describe(resumed)}"
    return text + "."


def summary_markdown(manifest: dict, summary: dict, rows: list[EvalRow], warm: dict | None, digest: str) -> str:
    t = summary["time_split"]
    lines = [
        f"# Evaluation: {manifest['label']}",
        "",
        f"Method `{manifest['method']}` on `{Path(manifest['data']).name}` "
        f"({summary['questions']} questions, in file order), namespace `{manifest['namespace']}`, seed {manifest['seed']}.",
        f"Models: {', '.join(f'{role} = {name}' for role, name in manifest['models'].items())}.",
        f"Agent: {', '.join(f'{k}={v}' for k, v in manifest['agent'].items())}.",
        code_line(manifest),
        f"Every number below is computed from `{ROWS_FILE}` (sha256 `{digest[:16]}`); "
        "`python -m backend.eval --summarize DIR` recomputes it.",
        "",
        METRICS_HEADER,
        metrics_table_row(manifest["label"], summary),
        "",
        f"Verdicts: {', '.join(f'{k} {v}' for k, v in sorted(summary['verdicts'].items()))}; "
        f"failed runs {summary['failed_runs']}; forced answers {summary['forced_answers']}"
        + "".join(f"; forced by {reason or 'unstated'}: {n}" for reason, n in sorted(summary["forced_reasons"].items()))
        + ".",
        "",
        "## Where the time went",
        "",
        "| | seconds | share of wall |",
        "|---|---|---|",
    ]
    for name, key in (("LLM calls", "llm_s"), ("tools", "tool_s"), ("framework overhead", "other_s")):
        share = t[key] / t["wall_s"] if t["wall_s"] else float("nan")
        lines.append(f"| {name} | {t[key]:.1f} | {_pct(share)} |")
    lines.append(f"| wall (agent's clock, {t['runs']} completed runs) | {t['wall_s']:.1f} | 100% |")
    lines.append(f"| harness clock (includes event handling) | {t['harness_s']:.1f} | |")
    verdict = "meets" if t["overhead_share"] == t["overhead_share"] and t["overhead_share"] < OVERHEAD_TARGET else "misses"
    lines += ["", f"Framework overhead {_pct(t['overhead_share'])} of wall time: {verdict} the target of "
              f"{_pct(OVERHEAD_TARGET)}."]
    if warm is not None:
        lines += [
            "",
            f"## Warm-up ({Path(manifest['warm_from']).name}, {warm['questions']} questions)",
            "",
            METRICS_HEADER,
            metrics_table_row("warm-up", warm),
        ]
    lines += [
        "",
        "## Learning curve (accuracy over the first i questions)",
        "",
        " ".join(f"{i}: {_pct(v)}" for i, v in _checkpoints(summary["learning_curve"])),
        "",
        "## Rows",
        "",
        "| # | id | gold | answer | verdict | EM | F1 | LLM calls | tokens | tools | wall s | memories |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        answer = r.answer.replace("|", "/").replace("\n", " ")[:60]
        lines.append(
            f"| {r.index} | {r.id} | {r.gold.replace('|', '/')} | {answer} | {r.verdict} | {r.em:.0f} | {r.f1:.2f} "
            f"| {r.llm_calls} | {r.prompt_tokens + r.completion_tokens} | {r.tool_calls} | {r.wall_seconds:.1f} "
            f"| {r.memories_used} |"
        )
    return "\n".join(lines) + "\n"


def _checkpoints(curve: list[float]) -> list[tuple[int, float]]:
    """About ten evenly spaced points of the curve, always including the last one."""
    if not curve:
        return []
    step = max(1, len(curve) // 10)
    points = list(range(step, len(curve) + 1, step))
    if points[-1] != len(curve):
        points.append(len(curve))
    return [(i, curve[i - 1]) for i in points]


def write_summary(out_dir: Path) -> dict:
    """Recompute summary.json and summary.md of an evaluation folder from its rows."""
    out_dir = Path(out_dir)
    manifest = read_manifest(out_dir)
    rows = [with_first_answer(r, out_dir, manifest["namespace"])
            for r in rows_in_scope(ResultsFile(out_dir / ROWS_FILE).read(), manifest["limit"])]
    summary = summarize(rows)
    warm_rows = ResultsFile(out_dir / WARM_ROWS_FILE).read()
    warm = summarize(warm_rows) if warm_rows else None
    digest = file_digest(out_dir / ROWS_FILE)
    document = {"manifest": manifest, "rows_file": ROWS_FILE, "rows_sha256": digest, "summary": summary, "warm_up": warm}
    (out_dir / SUMMARY_JSON).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    (out_dir / SUMMARY_MD).write_text(summary_markdown(manifest, summary, rows, warm, digest), encoding="utf-8")
    return document


def with_first_answer(row: EvalRow, out_dir: Path, namespace: str) -> EvalRow:
    """A row from before rows recorded the first answer's time gets it from its run log (if kept)."""
    if row.first_answer_seconds is not None or not row.run_id:
        return row
    events = logged_events(out_dir, namespace, row.run_id)
    if events is None:
        return row
    return dataclasses.replace(row, first_answer_seconds=replay(events).first_answer_seconds)


def rows_in_scope(rows: list[EvalRow], limit: int | None) -> list[EvalRow]:
    """The rows of the first `limit` questions, in stream order (a folder may hold more from a longer run)."""
    ordered = sorted(rows, key=lambda r: r.index)
    return [r for r in ordered if limit is None or r.index < limit]
