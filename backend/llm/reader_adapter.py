"""The trained reader: a LoRA adapter for the Executor's model, with the manifest that says what it
was trained on and how, checked before it serves.

    <folder>/adapter/          the peft LoRA (vLLM's --lora-modules loads it)
    <folder>/adapter.gguf      the same, converted for llama.cpp (backend.llm.gguf_lora)
    <folder>/manifest.json     base model sha256, training data sha256, commit, command, steps,
                               validation scores, examples per source

An adapter is applied to a model only when the model's weights are the ones it was trained on (the
GGUF's sha256); otherwise it is refused with a sentence that says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from backend.code_identity import code_identity
from backend.llm.base import LLMError

MANIFEST = "manifest.json"
ADAPTER_DIR = "adapter"
ADAPTER_GGUF = "adapter.gguf"
MANIFEST_FORMAT = 1


@dataclass(frozen=True)
class ReaderAdapter:
    folder: Path
    manifest: dict

    @property
    def gguf(self) -> Path:
        return self.folder / ADAPTER_GGUF

    @property
    def peft_dir(self) -> Path:
        return self.folder / ADAPTER_DIR

    @property
    def name(self) -> str:
        """How the Settings view and an evaluation's manifest name the reader."""
        steps = self.manifest.get("steps")
        return f"{self.folder.name} (LoRA, {steps} steps, data {str(self.manifest.get('data_sha256', ''))[:12]})"

    def as_version(self) -> ServedReader:
        """The adapter as an OpenAI-compatible server loads it (backend.llm.adapters: vLLM's LoRA modules)."""
        return ServedReader(name=self.folder.name, adapter_dir=str(self.peft_dir))


@dataclass(frozen=True)
class ServedReader:
    name: str
    adapter_dir: str
    role: str = "executor"

    @property
    def adapter_path(self) -> Path:
        return Path(self.adapter_dir)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_sha256(path: Path) -> str:
    """The sha256 of a model file, remembered beside it by size and modification time (a GGUF is a
    gigabyte: hashing it takes seconds); where the folder is read-only, computed each time."""
    path = Path(path)
    stat = path.stat()
    key = f"{stat.st_size}:{stat.st_mtime_ns}"
    remembered = path.with_name(path.name + ".sha256")
    try:
        cached_key, digest = remembered.read_text(encoding="utf-8").split()
        if cached_key == key:
            return digest
    except (OSError, ValueError):
        pass
    digest = file_sha256(path)
    try:
        partial = remembered.with_name(remembered.name + f".{os.getpid()}")
        partial.write_text(f"{key} {digest}\n", encoding="utf-8")
        partial.replace(remembered)
    except OSError:
        pass
    return digest


def write_manifest(folder: Path, **fields: object) -> Path:
    folder = Path(folder)
    manifest = {"format": MANIFEST_FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                **code_identity(), **fields}
    if (folder / ADAPTER_DIR / "adapter_model.safetensors").is_file():
        manifest["adapter_sha256"] = file_sha256(folder / ADAPTER_DIR / "adapter_model.safetensors")
    partial = folder / (MANIFEST + ".partial")
    partial.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    partial.replace(folder / MANIFEST)
    return folder / MANIFEST


def read_reader_adapter(folder: Path) -> ReaderAdapter:
    """The adapter in `folder`, its manifest read and its files present; LLMError saying what to do
    otherwise."""
    folder = Path(folder)
    where = f"The reader adapter at {folder}"
    if not (folder / MANIFEST).is_file():
        raise LLMError(f"{where} has no {MANIFEST}; train one with `make reader` (docs/training.md) or set "
                       "roles.executor.adapter = \"\" to answer with the base model.")
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as problem:
        raise LLMError(f"{where}: {MANIFEST} is not readable JSON ({problem}); restore it from git or retrain.") from problem
    if not isinstance(manifest, dict) or not isinstance(manifest.get("base_model_sha256"), str):
        raise LLMError(f"{where}: {MANIFEST} does not name the base model's sha256; restore it from git or retrain.")
    if manifest.get("format", 0) > MANIFEST_FORMAT:
        raise LLMError(f"{where} was written by a newer version of this project (manifest format "
                       f"{manifest.get('format')}); update the code or set roles.executor.adapter = \"\".")
    return ReaderAdapter(folder, manifest)


def check_base(adapter: ReaderAdapter, base_gguf: Path) -> None:
    """Refuses an adapter trained on other weights than `base_gguf`'s."""
    trained_on = adapter.manifest["base_model_sha256"]
    actual = model_sha256(base_gguf)
    if actual != trained_on:
        raise LLMError(
            f"The reader adapter at {adapter.folder} was trained on a model with sha256 {trained_on[:16]}..., but the "
            f"Executor's model {Path(base_gguf).name} has sha256 {actual[:16]}...: it would read wrongly on other "
            "weights. Retrain it on this model (`make reader`) or set roles.executor.adapter = \"\".")
