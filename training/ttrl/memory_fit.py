"""Whether test-time learning fits in this machine's memory, asked before the Planner's weights load.

The learner's peak (one signal's rollouts and one GRPO update, benchmarks/learner_memory_bench.py)
grows with the trained copy's weights: PEAK_PER_WEIGHT_BYTE times their bytes plus a fixed
WORKSPACE_BYTES, on top of what the process holds already. Free memory is the kernel's
MemAvailable, or less where the process's cgroup has a lower limit. The kernel's out-of-memory
kills are counted too (the machine's and the cgroup's), so that a worker the kernel killed can be
told from one that crashed.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from backend.llm.gguf_metadata import read_gguf_parameter_count

GB = 1e9
BYTES_PER_WEIGHT = {"bfloat16": 2, "float32": 4}
# benchmarks/learner_memory_bench.py on Qwen2.5-Coder-1.5B (1.78 billion weights, 3.56 GB in bfloat16):
# the learner added 5.24 GB to its worker (the weights, then 1.65 GB more at the update's peak) on turns
# of up to 215 tokens: 1.25 x the weights' bytes + 0.8 GB. WORKSPACE_BYTES adds 0.5 GB to that for turns
# of about 2,000 tokens (gradient checkpointing keeps one layer's activations, ~0.35 GB there; estimated).
# Since the process returns freed blocks (training.freed_memory) the measured part is 4.23 GB (1.16 x,
# a packed update of 526 tokens, 2026-12-05): the estimate keeps its margin for longer turns.
PEAK_PER_WEIGHT_BYTE = 1.25
WORKSPACE_BYTES = int(1.3 * GB)
_NO_LIMIT = 1 << 60  # cgroup v1 writes "no limit" as a number near 2**63


class NotEnoughMemory(RuntimeError):
    """Loading the Planner's weights for training would not fit in the free memory; the message says what to do."""


@dataclass(frozen=True)
class MemoryNeed:
    """What training the Planner adds to its process's memory at its peak."""

    weights: int  # parameters of the trained copy
    dtype: str  # their dtype while training
    bytes: int

    @property
    def description(self) -> str:
        return f"about {self.bytes / GB:.1f} GB ({self.weights / 1e9:.2f} billion weights in {self.dtype})"


def learner_need(weights_source: Path, dtype: str) -> MemoryNeed:
    """The need of a learner training the weights in `weights_source` (a transformers folder or a
    GGUF file) in `dtype`."""
    if dtype not in BYTES_PER_WEIGHT:
        raise ValueError(f"dtype must be one of {', '.join(BYTES_PER_WEIGHT)}, got {dtype!r}.")
    source = Path(weights_source)
    if not source.exists():
        raise ValueError(f"The Planner's weights {source} do not exist; point ttrl.base_model_dir at a "
                         "transformers model folder.")
    weights = _weight_count(str(source), source.stat().st_mtime_ns)
    return MemoryNeed(weights, dtype, int(weights * BYTES_PER_WEIGHT[dtype] * PEAK_PER_WEIGHT_BYTE) + WORKSPACE_BYTES)


@lru_cache(maxsize=8)
def _weight_count(source: str, _mtime_ns: int) -> int:
    """Parameters in a GGUF's tensor infos or a folder's safetensors headers (tied weights are stored once)."""
    path = Path(source)
    if path.is_file():
        return read_gguf_parameter_count(path)
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ValueError(f"{path} holds no .safetensors weights, so the memory test-time learning needs is "
                         "unknown; point ttrl.base_model_dir at a transformers model folder saved as safetensors.")
    return sum(_safetensors_weights(file) for file in files)


def _safetensors_weights(path: Path) -> int:
    with open(path, "rb") as file:
        (header_size,) = struct.unpack("<Q", file.read(8))
        header = json.loads(file.read(header_size))
    total = 0
    for name, entry in header.items():
        if name != "__metadata__":
            count = 1
            for size in entry["shape"]:
                count *= size
            total += count
    return total


def free_memory_bytes(root: Path = Path("/")) -> int:
    """Memory this process could still take: MemAvailable, or its cgroup's room if that is less."""
    available = _meminfo_available(root)
    room = _cgroup_room(root)
    return available if room is None else min(available, room)


def require_memory(need: MemoryNeed, root: Path = Path("/")) -> None:
    """Raise NotEnoughMemory, naming the need and what is free, when the need does not fit."""
    free = free_memory_bytes(root)
    if need.bytes <= free:
        return
    lighter = (' or set ttrl.weights_dtype = "bfloat16" (half the memory)' if need.dtype == "float32" else "")
    raise NotEnoughMemory(
        f"Test-time learning needs {need.description} free; {free / GB:.1f} GB is free. Close other programs"
        f"{lighter}, or set ttrl.enabled = false."
    )


def oom_kill_count(root: Path = Path("/")) -> int:
    """Out-of-memory kills so far, the machine's and this process's cgroup's: a rise while a process
    ran means the kernel's out-of-memory killer acted then."""
    total = _field(root / "proc" / "vmstat", "oom_kill") or 0
    v2, v1 = _cgroup_dirs(root)
    for path in ([v2 / "memory.events"] if v2 else []) + ([v1 / "memory.oom_control"] if v1 else []):
        total += _field(path, "oom_kill") or 0
    return total


def _meminfo_available(root: Path) -> int:
    kib = _field(root / "proc" / "meminfo", "MemAvailable:")
    if kib is None:
        raise NotEnoughMemory("The kernel does not say how much memory is free (no MemAvailable in /proc/meminfo), "
                              "so test-time learning cannot check that it fits; set ttrl.enabled = false.")
    return kib * 1024


def _cgroup_room(root: Path) -> int | None:
    """The cgroup's limit minus what it uses that cannot be reclaimed (its page cache can), or None without a limit."""
    v2, v1 = _cgroup_dirs(root)
    if v2 is not None and (v2 / "memory.max").is_file():
        limit, used = _number(v2 / "memory.max"), _number(v2 / "memory.current")
        cache = _field(v2 / "memory.stat", "inactive_file") or 0
    elif v1 is not None and (v1 / "memory.limit_in_bytes").is_file():
        limit, used = _number(v1 / "memory.limit_in_bytes"), _number(v1 / "memory.usage_in_bytes")
        cache = _field(v1 / "memory.stat", "total_inactive_file") or 0
    else:
        return None
    if limit is None or limit >= _NO_LIMIT or used is None:
        return None
    return max(0, limit - (used - cache))


def _cgroup_dirs(root: Path) -> tuple[Path | None, Path | None]:
    """This process's cgroup folders, (v2, v1 memory controller); a container sees its own cgroup at the mount."""
    v2 = v1 = None
    membership = root / "proc" / "self" / "cgroup"
    lines = membership.read_text().splitlines() if membership.is_file() else []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            v2 = _existing(root / "sys" / "fs" / "cgroup", path, "memory.events")
        elif "memory" in controllers.split(","):
            v1 = _existing(root / "sys" / "fs" / "cgroup" / "memory", path, "memory.usage_in_bytes")
    return v2, v1


def _existing(mount: Path, path: str, marker: str) -> Path | None:
    for folder in (mount / path.lstrip("/"), mount):
        if (folder / marker).is_file():
            return folder
    return None


def _field(path: Path, name: str) -> int | None:
    """The number after `name` on its line of a kernel table ("oom_kill 3", "MemAvailable:  123 kB")."""
    if not path.is_file():
        return None
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == name:
            return int(parts[1])
    return None


def _number(path: Path) -> int | None:
    text = path.read_text().strip() if path.is_file() else ""
    return int(text) if text.isdigit() else None
