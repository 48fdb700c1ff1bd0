"""Every run's event stream, kept as one JSONL file per run, per namespace.

The history view reopens a past run from here with its full trace; the evaluation harness and the
training data builders read the same files, each through backend.replay.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from backend.events import Event, event_from_dict
from backend.replay import replay

_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _safe_name(name: str) -> str:
    cleaned = _SAFE.sub("_", name)[:80]
    if not cleaned or cleaned in {".", ".."}:
        raise ValueError(f"{name!r} cannot be used as a namespace or run id")
    return cleaned


@dataclass
class RunSummary:
    run_id: str
    question: str
    answer: str
    verdict: str
    started: float
    thread: str = ""  # a follow-up's thread: the run id of its first question ("" for a question of its own)
    asked: str = ""  # a follow-up as the person typed it (`question` is the standalone wording researched)


class RunLog:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()

    def _path(self, namespace: str, run_id: str) -> Path:
        return self.root / _safe_name(namespace) / f"{_safe_name(run_id)}.jsonl"

    def append(self, namespace: str, event: Event) -> None:
        path = self._path(namespace, event.run_id)
        line = json.dumps(event.to_dict(), ensure_ascii=False)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as fp:
                fp.write(line + "\n")

    def load(self, namespace: str, run_id: str) -> list[Event]:
        path = self._path(namespace, run_id)
        if not path.exists():
            raise KeyError(f"no run {run_id!r} in namespace {namespace!r}")
        return self._read(path)

    @staticmethod
    def _read(path: Path) -> list[Event]:
        return [event_from_dict(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def list_runs(self, namespace: str, limit: int = 50) -> list[RunSummary]:
        """The namespace's runs, newest first. A question refused before its run started (empty,
        too long, a bad image) is logged as a failure alone and is no past run: it is left out."""
        folder = self.root / _safe_name(namespace)
        if not folder.exists():
            return []
        files = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
        summaries = []
        for path in files:
            if len(summaries) >= limit:
                break
            run = replay(self._read(path))
            if run.started is None:
                continue
            if run.failure is not None:
                verdict = "failed"
            elif run.verdict is not None:
                verdict = run.verdict.label if run.verdict.verified else f"{run.verdict.label} (unverified)"
            elif run.finished is not None and run.finished.stopped:
                verdict = "stopped"
            else:
                verdict = ""
            follow_up = run.started.follow_up or {}
            summaries.append(RunSummary(path.stem, run.question, run.answer, verdict, run.started.at,
                                        thread=str(follow_up.get("thread") or ""), asked=str(follow_up.get("asked") or "")))
        return summaries
