"""Planner versions on disk: each GRPO update makes one; the current one is a pointer file.

    <root>/versions/v0003/adapter/     the LoRA adapter (peft format; vLLM's --enable-lora loads it too)
    <root>/versions/v0003/meta.json    rewards, canary results, status, timings
    <root>/current.json                {"version": 3}; written to a temporary file, then renamed

Version 0 is the base model (no adapter). Statuses: ``promoted`` (passed the canary; may be current),
``rejected`` (did worse on the canary; kept for inspection, never loaded).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

PROMOTED, REJECTED = "promoted", "rejected"


class VersionError(ValueError):
    """A version operation is not possible; the message says what to do."""


@dataclass
class Version:
    number: int
    status: str = PROMOTED
    parent: int | None = None
    created: float = field(default_factory=time.time)
    train_reward: float | None = None  # mean reward of the rollouts of the batch that made it
    canary_reward: float | None = None  # mean canary reward of this version
    parent_canary_reward: float | None = None
    update_seconds: float = 0.0
    canary_seconds: float = 0.0
    signals: int = 0
    rollouts: int = 0
    note: str = ""
    adapter_dir: str = ""  # "" for the base model

    @property
    def name(self) -> str:
        return f"v{self.number:04d}"

    @property
    def adapter_path(self) -> Path | None:
        return Path(self.adapter_dir) if self.adapter_dir else None


def write_json_atomically(path: Path, payload: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as fp:
        json.dump(payload, fp, indent=1)
        fp.flush()
        os.fsync(fp.fileno())
    os.replace(tmp, path)


class VersionStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.versions_dir = self.root / "versions"
        self.versions_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def _meta_path(self, number: int) -> Path:
        return self.versions_dir / f"v{number:04d}" / "meta.json"

    def all(self) -> list[Version]:
        found = [Version(**json.loads(meta.read_text(encoding="utf-8")))
                 for meta in sorted(self.versions_dir.glob("v*/meta.json"))]
        if not found or found[0].number != 0:
            found.insert(0, Version(0, note="base model"))
        return found

    def get(self, number: int) -> Version:
        for version in self.all():
            if version.number == number:
                return version
        raise VersionError(f"There is no Planner version {number}; the Learning view lists the versions.")

    def current(self) -> Version:
        pointer = self.root / "current.json"
        if not pointer.exists():
            return self.get(0)
        return self.get(int(json.loads(pointer.read_text(encoding="utf-8"))["version"]))

    def next_adapter_dir(self) -> tuple[int, Path]:
        with self._lock:
            # folders count too: an update that crashed before writing meta.json leaves one behind
            folders = [int(p.name[1:]) for p in self.versions_dir.glob("v[0-9]*") if p.name[1:].isdigit()]
            number = max([v.number for v in self.all()] + folders) + 1
            target = self.versions_dir / f"v{number:04d}" / "adapter"
            target.mkdir(parents=True, exist_ok=False)
            return number, target

    def record(self, version: Version) -> Version:
        path = self._meta_path(version.number)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomically(path, asdict(version))
        return version

    def make_current(self, number: int) -> Version:
        """Point at a promoted version (or 0, the base model); a rejected one cannot be current."""
        version = self.get(number)
        if version.status != PROMOTED:
            raise VersionError(f"Version {number} was {version.status} by the canary; roll back to a promoted version.")
        with self._lock:
            write_json_atomically(self.root / "current.json", {"version": number, "at": time.time()})
        return version
