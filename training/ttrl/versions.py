"""Planner versions on disk: each GRPO update makes one; the current one is a pointer file.

    <root>/versions/v0003/adapter/     the LoRA adapter (peft format; vLLM's --enable-lora loads it too)
    <root>/versions/v0003/meta.json    rewards, canary results, status, timings
    <root>/current.json                {"version": 3}; written to a temporary file, then renamed
    <root>/staging/<random>/           a new adapter, saved before it is a version (see VersionStore.add)

Every change to the folder is a rename, made inside the store's `hold` (the worker's lease fence, see
memory_db.LeaseFence.holding): a learner that lost the lease is refused before it changes anything.

A version's record and adapter are training.ttrl.version_folder's; a damaged folder never stops a
reader (training.ttrl.version_repair moves what cannot be read aside).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from contextlib import nullcontext
from dataclasses import asdict, replace
from pathlib import Path

from training.ttrl.atomic_files import Hold, write_json_atomically
from training.ttrl.version_folder import ADAPTER, POINTER, PROMOTED, STAGED, Version
from training.ttrl.version_repair import QUARANTINE, FolderRepair


class VersionError(ValueError):
    """A version operation is not possible; the message says what to do."""


class VersionStore(FolderRepair):
    """The versions of one learning folder. `hold`: the context every change is made in (a learner
    worker's lease fence; the app's handle changes the pointer on a person's word and holds nothing)."""

    def __init__(self, root: Path, hold: Hold = nullcontext) -> None:
        self.root = Path(root)
        self.versions_dir = self.root / "versions"
        self.versions_dir.mkdir(parents=True, exist_ok=True)
        self.quarantine_dir = self.versions_dir / QUARANTINE
        self._hold = hold
        self._lock = threading.Lock()

    def _meta_path(self, number: int) -> Path:
        return self.versions_dir / f"v{number:04d}" / "meta.json"

    def all(self) -> list[Version]:
        return self._read().versions

    def get(self, number: int) -> Version:
        for version in self.all():
            if version.number == number:
                return version
        raise VersionError(f"There is no Planner version {number}; the Learning view lists the versions.")

    def current(self) -> Version:
        reading = self._read()
        number = reading.pointer or 0
        # the base model when a process changed the folder between the repair and this read (read again)
        return next((v for v in reading.versions if v.number == number), None) or self._read().versions[0]

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
        # folders count too: an update that crashed before writing meta.json leaves one behind, and a
        # quarantined version's number is never given again
        folders = [int(p.name[1:5]) for folder in (self.versions_dir, self.quarantine_dir)
                   for p in folder.glob("v[0-9][0-9][0-9][0-9]*") if p.name[1:5].isdigit()]
        return max([v.number for v in self._scan().versions] + folders) + 1  # inside add's hold: no repair

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
        write_json_atomically(self.root / POINTER, {"version": number, "at": time.time()})
