"""Planner versions on disk: each GRPO update makes one; the current one is a pointer file.

    <root>/versions/v0003/adapter/     the LoRA adapter (peft format; vLLM's --enable-lora loads it too)
    <root>/versions/v0003/meta.json    rewards, canary results, status, timings
    <root>/current.json                {"version": 3}; written to a temporary file, then renamed
    <root>/staging/<random>/           a new adapter, saved before it is a version (see VersionStore.add)

Version 0 is the base model (no adapter). Statuses: ``promoted`` (passed the canary; may be current),
``rejected`` (did worse on the canary; kept for inspection, never loaded).

Every change to the folder is a rename, made inside the store's `hold` (the worker's lease fence, see
memory_db.LeaseFence.holding): a learner that lost the lease is refused before it changes anything.

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
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path

Hold = Callable[[], AbstractContextManager]

PROMOTED, REJECTED = "promoted", "rejected"


ADAPTER = "adapter"  # a version folder's LoRA adapter (peft); its llama.cpp conversion lies beside it
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")  # what peft saves, newest format first
STAGED = -1  # the number of an adapter not yet a version (staged_version)
POINTER = "current.json"
POINTER_KEYS = ("version", "at")
QUARANTINE = "quarantine"  # under versions/: what could not be read, moved aside
QUARANTINE_LOG = "quarantined.jsonl"
QUARANTINE_SHOWN = 3  # moves the notes name (newest first)


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


class DamagedFile(ValueError):
    """A file of the learning folder cannot be read; the message is the rest of a sentence ("its ...")."""


def safetensors_problem(path: Path) -> str | None:
    """Why a .safetensors file cannot be complete (None when its header's tensors all fit in it)."""
    size = path.stat().st_size
    with path.open("rb") as file:
        head = file.read(8)
        if len(head) < 8:
            return f"{path.name} is cut short ({size} bytes)"
        header_bytes = int.from_bytes(head, "little")
        if 8 + header_bytes > size:
            return f"{path.name} is cut short ({size:,} bytes; its header alone needs {8 + header_bytes:,})"
        try:
            header = json.loads(file.read(header_bytes))
            data_bytes = max((int(t["data_offsets"][1]) for name, t in header.items() if name != "__metadata__"),
                             default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            return f"{path.name} is not a safetensors file ({type(exc).__name__}: {exc})"
    if 8 + header_bytes + data_bytes > size:
        return f"{path.name} is cut short ({size:,} of {8 + header_bytes + data_bytes:,} bytes)"
    return None


def adapter_problem(adapter: Path) -> str | None:
    """Why a version's peft adapter folder cannot be loaded, as the rest of "its ..." (None: it looks whole)."""
    if not adapter.is_dir():
        return f"adapter folder {adapter} is missing"
    config = adapter / ADAPTER_CONFIG
    if not config.is_file():
        return f"adapter folder has no {ADAPTER_CONFIG}"
    try:
        if not isinstance(json.loads(config.read_text(encoding="utf-8")), dict):
            return f"{ADAPTER_CONFIG} is not a JSON object"
    except (ValueError, UnicodeDecodeError) as exc:
        return f"{ADAPTER_CONFIG} is not JSON ({exc})"
    weights = [adapter / name for name in ADAPTER_WEIGHTS if (adapter / name).is_file()]
    if not weights:
        return f"adapter folder has no weights ({' or '.join(ADAPTER_WEIGHTS)})"
    return safetensors_problem(weights[0]) if weights[0].suffix == ".safetensors" else None


VERSION_KEYS = tuple(f.name for f in fields(Version))


def read_meta(path: Path) -> tuple[Version, list[str]]:
    """A version's record and the keys in it this code does not know (ignored); DamagedFile when it is
    not a version's record."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedFile(f"meta.json is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise DamagedFile("meta.json is not a JSON object")
    try:
        version = Version(**{key: value for key, value in data.items() if key in VERSION_KEYS})
    except TypeError as exc:
        raise DamagedFile(f"meta.json is not a version's record ({exc})") from None
    if not isinstance(version.number, int) or isinstance(version.number, bool):
        raise DamagedFile(f"meta.json's number is {version.number!r}, not a whole number")
    if not isinstance(version.adapter_dir, str):
        raise DamagedFile(f"meta.json's adapter_dir is {version.adapter_dir!r}, not a path")
    return version, sorted(key for key in data if key not in VERSION_KEYS)


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

    # -- reading a folder that may be damaged -----------------------------------------------------
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
