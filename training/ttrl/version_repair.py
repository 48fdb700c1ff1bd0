"""Reading a learning folder that may be damaged (the versions' store, training.ttrl.versions).

A damaged folder never stops a reader. A version whose `meta.json` is not a version's record, or a
promoted version whose adapter is incomplete (no folder, no `adapter_config.json`, weights cut short),
is moved aside into `<root>/versions/quarantine/vNNNN`; a `current.json` that cannot be read, or that
names a version that is not there (or was just moved aside), is moved aside too
(`quarantine/current-<time>.json`) and the pointer is set to the last version that loads: the
damaged version's nearest promoted ancestor, else the newest promoted version below it, else the
base model (an unreadable pointer names no version: the base model). Each move is a line of
`quarantine/quarantined.jsonl`; `notes()` says what was moved and why, for the Learning view. Keys a
newer version of this code wrote into `meta.json` or `current.json` are ignored with a note. Numbers
of quarantined versions are never given again.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from training.ttrl.version_folder import (POINTER, POINTER_KEYS, PROMOTED, DamagedFile, Version, adapter_problem,
                                         read_meta)

QUARANTINE = "quarantine"  # under versions/: what could not be read, moved aside
QUARANTINE_LOG = "quarantined.jsonl"
QUARANTINE_SHOWN = 3  # moves the notes name (newest first)


def _keys(names: list[str]) -> str:
    return ", ".join(names)


@dataclass
class _Damage:
    """A version folder that cannot be loaded: why, and its record when that much could be read."""

    folder: Path
    reason: str
    version: Version | None = None


@dataclass
class _Reading:
    """What the folder holds now, as far as it can be read."""

    versions: list[Version]  # readable, the base model first
    damaged: list[_Damage]
    pointer: int | None  # the number current.json names (None: no pointer, or an unreadable one)
    pointer_problem: str  # why current.json cannot be read ("" when it can, or is absent)
    notes: list[str]  # keys this code does not know, ignored

    def has(self, number: int) -> bool:
        return any(v.number == number for v in self.versions)

    @property
    def needs_repair(self) -> bool:
        return bool(self.damaged or self.pointer_problem or (self.pointer is not None and not self.has(self.pointer)))


class FolderRepair:
    """The reading side of VersionStore: every read of the folder moves what cannot be read aside
    first. It uses the store's root, versions_dir, quarantine_dir, _hold, _lock and _write_pointer."""

    def notes(self) -> list[str]:
        """What the Learning view says about the folder: the newest moves into quarantine, and keys this
        code does not know (ignored), as sentences."""
        return [quarantine_sentence(record) for record in self.quarantined(QUARANTINE_SHOWN)] + self._read().notes

    def quarantined(self, limit: int | None = None) -> list[dict]:
        """The records of what was moved aside, newest first."""
        log_path = self.quarantine_dir / QUARANTINE_LOG
        if not log_path.exists():
            return []
        records = []
        for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:  # a line cut short by a crash: the moves it would name are in the folder
                continue
            if isinstance(record, dict):
                records.append(record)
        return records[::-1][:limit]

    def _read(self) -> _Reading:
        reading = self._scan()
        return self._repair() if reading.needs_repair else reading

    def _scan(self) -> _Reading:
        versions, damaged, notes = [], [], []
        for meta in sorted(self.versions_dir.glob("v*/meta.json")):
            try:
                version, unknown = read_meta(meta)
            except DamagedFile as exc:
                damaged.append(_Damage(meta.parent, str(exc)))
                continue
            except FileNotFoundError:  # moved aside by another process meanwhile
                continue
            problem = adapter_problem(version.adapter_path) if version.adapter_path and version.status == PROMOTED else None
            if problem:
                damaged.append(_Damage(meta.parent, problem, version))
                continue
            if unknown:
                notes.append(f"{version.name}'s meta.json has keys this code does not know ({_keys(unknown)}): "
                             "ignored (a newer version of the app wrote them)")
            versions.append(version)
        if not versions or versions[0].number != 0:
            versions.insert(0, Version(0, note="base model"))
        pointer, problem = None, ""
        path = self.root / POINTER
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = None
        except (ValueError, UnicodeDecodeError) as exc:
            data, problem = None, f"it is not JSON ({exc})"
        if data is not None:
            number = data.get("version") if isinstance(data, dict) else None
            if not isinstance(number, int) or isinstance(number, bool):
                problem = f"it names no version number ({json.dumps(data)[:120]})"
            else:
                pointer = number
                unknown = sorted(set(data) - set(POINTER_KEYS))
                if unknown:
                    notes.append(f"current.json has keys this code does not know ({_keys(unknown)}): ignored "
                                 "(a newer version of the app wrote them)")
        return _Reading(versions, damaged, pointer, problem, notes)

    @contextmanager
    def _repairing(self):
        """One repair at a time across the processes sharing the folder (the app's and the worker's)."""
        with open(self.root / ".versions.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _repair(self) -> _Reading:
        """Move what cannot be read into quarantine and point at the last version that loads."""
        with self._repairing(), self._hold(), self._lock:
            reading = self._scan()  # another process may have repaired the folder meanwhile
            pointed = reading.pointer
            for damage in reading.damaged:
                moved_to = self._move_aside(damage.folder, damage.folder.name)
                if moved_to is None:
                    continue
                record = {"item": damage.folder.name, "reason": damage.reason, "moved_to": moved_to}
                if pointed is not None and damage.folder.name == f"v{pointed:04d}":
                    parent = damage.version.parent if damage.version is not None else None
                    fallback = self._last_that_loads(reading, below=pointed, parent=parent)
                    self._write_pointer(fallback.number)
                    record["now_current"] = fallback.name
                self._log_quarantine(record)
            reading = self._scan()
            if reading.pointer_problem:
                moved_to = self._move_aside(self.root / POINTER, f"current-{time.strftime('%Y%m%d-%H%M%S')}.json")
                if moved_to is not None:
                    self._log_quarantine({"item": POINTER, "reason": reading.pointer_problem, "moved_to": moved_to,
                                          "now_current": Version(0).name})
            elif reading.pointer is not None and not reading.has(reading.pointer):
                missing = reading.pointer
                fallback = self._last_that_loads(reading, below=missing, parent=None)
                moved_to = self._move_aside(self.root / POINTER, f"current-{time.strftime('%Y%m%d-%H%M%S')}.json")
                self._write_pointer(fallback.number)
                self._log_quarantine({"item": POINTER, "reason": f"it names {Version(missing).name}, which is not there",
                                      "moved_to": moved_to or "", "now_current": fallback.name})
            return self._scan()

    @staticmethod
    def _last_that_loads(reading: _Reading, *, below: int, parent: int | None) -> Version:
        """The version to answer with instead of `below`: its nearest readable promoted ancestor (`parent`
        and on), else the newest readable promoted version numbered below it, else the base model."""
        promoted = {v.number: v for v in reading.versions if v.status == PROMOTED}
        if parent in promoted:
            return promoted[parent]
        older = [number for number in promoted if number < below]
        return promoted[max(older)] if older else reading.versions[0]

    def _move_aside(self, path: Path, name: str) -> str | None:
        """Move `path` into the quarantine folder (under `name`, made unique); where it went, relative to
        the learning folder, or None when it was gone already (another process moved it)."""
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        target = self.quarantine_dir / name
        if target.exists():
            target = self.quarantine_dir / f"{name}-{uuid.uuid4().hex[:6]}"
        try:
            os.replace(path, target)
        except FileNotFoundError:
            return None
        return str(target.relative_to(self.root))

    def _log_quarantine(self, record: dict) -> None:
        line = json.dumps({"at": time.time(), **record}, ensure_ascii=False) + "\n"
        with (self.quarantine_dir / QUARANTINE_LOG).open("a", encoding="utf-8") as log_file:
            log_file.write(line)


def quarantine_sentence(record: dict) -> str:
    """One move into quarantine, as the Learning view says it."""
    at = record.get("at")
    when = f" at {datetime.fromtimestamp(at):%Y-%m-%d %H:%M}" if isinstance(at, (int, float)) else ""
    item, reason = str(record.get("item", "?")), str(record.get("reason", "?"))
    now = record.get("now_current")
    where = f"moved to {record['moved_to']}" if record.get("moved_to") else "set aside"
    if item == POINTER:
        after = (f"; the Planner answers with {now}" if now else "")
        choose = " (roll back to the version you want in the Learning view)" if now == Version(0).name else ""
        return f"current.json could not be used{when}: {reason}; it was {where}{after}{choose}"
    after = f", and {now} answers instead" if now else ""
    return f"Planner {item} was skipped{when}: its {reason}; it was {where}{after}"
