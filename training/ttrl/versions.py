"""Planner versions on disk: each GRPO update makes one; the current one is a pointer file.

    <root>/versions/v0003/adapter/     the LoRA adapter (peft format; vLLM's --enable-lora loads it too)
    <root>/versions/v0003/meta.json    rewards, canary results, status, timings
    <root>/current.json                {"version": 3}; written to a temporary file, then renamed
    <root>/staging/<random>/           a new adapter, saved before it is a version (see VersionStore.add)

Version 0 is the base model (no adapter). Statuses: ``promoted`` (passed the canary; may be current),
``rejected`` (did worse on the canary; kept for inspection, never loaded).

Every change to the folder is a rename, made inside the store's `hold` (the worker's lease fence, see
memory_db.LeaseFence.holding): a learner that lost the lease is refused before it changes anything.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

Hold = Callable[[], AbstractContextManager]

PROMOTED, REJECTED = "promoted", "rejected"


ADAPTER = "adapter"  # a version folder's LoRA adapter (peft); its llama.cpp conversion lies beside it
STAGED = -1  # the number of an adapter not yet a version (staged_version)


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
    prompts: str = ""  # backend.code_identity.prompts_digest() of the prompts it was trained with ("" before recorded)
    canary_on: str = ""  # what answered its canary: "llamacpp" or "transformers" ("" before recorded: transformers)

    @property
    def name(self) -> str:
        return "staged" if self.number == STAGED else f"v{self.number:04d}"

    @property
    def adapter_path(self) -> Path | None:
        return Path(self.adapter_dir) if self.adapter_dir else None


def write_atomically(path: Path, text: str, hold: Hold = nullcontext) -> None:
    """Write `text` to a temporary file of this call's own (two writers never share one), then rename
    it over `path` inside `hold()`; a refused hold leaves `path` as it was and removes the temporary file."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fp:
            fp.write(text)
            fp.flush()
            os.fsync(fp.fileno())
        with hold():
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json_atomically(path: Path, payload: dict, hold: Hold = nullcontext) -> None:
    write_atomically(path, json.dumps(payload, indent=1), hold)


class VersionStore:
    """The versions of one learning folder. `hold`: the context every change is made in (a learner
    worker's lease fence; the app's handle changes the pointer on a person's word and holds nothing)."""

    def __init__(self, root: Path, hold: Hold = nullcontext) -> None:
        self.root = Path(root)
        self.versions_dir = self.root / "versions"
        self.versions_dir.mkdir(parents=True, exist_ok=True)
        self._hold = hold
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

    def staging_dir(self) -> Path:
        """An empty folder of this caller's own, laid out as a version's: the new adapter is saved in its
        `adapter/` (staged_version), and the whole folder becomes the version (add)."""
        folder = self.root / "staging" / uuid.uuid4().hex
        folder.mkdir(parents=True)
        return folder

    @staticmethod
    def staged_version(staged: Path) -> Version:
        """The adapter saved in a staging folder, as a version the canary can load before it is one."""
        return Version(STAGED, adapter_dir=str(staged / ADAPTER))

    def _next_number(self) -> int:
        # folders count too: an update that crashed before writing meta.json leaves one behind
        folders = [int(p.name[1:]) for p in self.versions_dir.glob("v[0-9]*") if p.name[1:].isdigit()]
        return max([v.number for v in self.all()] + folders) + 1

    def add(self, staged: Path, version: Version, *, make_current: bool) -> Version:
        """The staging folder (staging_dir, its adapter in `adapter/`) becomes the next version's folder:
        `version` with its number and adapter folder given here, recorded, and made current when
        `make_current` (a promotion), all inside one hold."""
        with self._hold(), self._lock:
            number = self._next_number()
            folder = self.versions_dir / f"v{number:04d}"
            os.replace(staged, folder)
            version = replace(version, number=number, adapter_dir=str(folder / ADAPTER))
            write_json_atomically(folder / "meta.json", asdict(version))
            if make_current:
                self._write_pointer(number)
        return version

    def record(self, version: Version) -> Version:
        path = self._meta_path(version.number)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomically(path, asdict(version), self._hold)
        return version

    def make_current(self, number: int) -> Version:
        """Point at a promoted version (or 0, the base model); a rejected one cannot be current."""
        version = self.get(number)
        if version.status != PROMOTED:
            raise VersionError(f"Version {number} was {version.status} by the canary; roll back to a promoted version.")
        with self._hold(), self._lock:
            self._write_pointer(number)
        return version

    def _write_pointer(self, number: int) -> None:
        write_json_atomically(self.root / "current.json", {"version": number, "at": time.time()})
