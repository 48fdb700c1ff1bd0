"""What a Planner version is on disk: its record (`meta.json`), its adapter folder, the current-version
pointer's name, and whether a record or an adapter can be read (training.ttrl.versions shows the
folder's layout).

Version 0 is the base model (no adapter). Statuses: ``promoted`` (passed the canary; may be current),
``rejected`` (did worse on the canary; kept for inspection, never loaded).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

PROMOTED, REJECTED = "promoted", "rejected"


ADAPTER = "adapter"  # a version folder's LoRA adapter (peft); its llama.cpp conversion lies beside it
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")  # what peft saves, newest format first
STAGED = -1  # the number of an adapter not yet a version (staged_version)
POINTER = "current.json"
POINTER_KEYS = ("version", "at")


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
