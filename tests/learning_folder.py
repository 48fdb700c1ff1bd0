"""A learning folder with two promoted Planner versions of the tiny model (v0001, then v0002, current),
and the seven ways it is found damaged: what each does to the files, and what a reader must make of it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from training.ttrl.version_folder import ADAPTER, PROMOTED, Version
from training.ttrl.versions import VersionStore


def write_adapter(folder: Path, model_dir: Path, seed: int) -> Path:
    """A real, non-zero LoRA adapter of the model in `model_dir` (peft's own files)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    tuned = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    tuned.save_pretrained(folder)
    return folder


def two_promoted_versions(root: Path, model_dir: Path) -> VersionStore:
    """v0001 (from the base model) and v0002 (from v0001), both promoted; v0002 is current."""
    store = VersionStore(root)
    for number in (1, 2):
        folder = root / "versions" / f"v{number:04d}"
        write_adapter(folder / ADAPTER, model_dir, seed=number)
        store.record(Version(number, status=PROMOTED, parent=number - 1, canary_reward=0.2,
                             adapter_dir=str(folder / ADAPTER)))
    store.make_current(2)
    return store


def _edit_json(path: Path, **keys) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **keys}))


@dataclass(frozen=True)
class Damage:
    """One damage: `apply(root)` makes it; then `answering` is the version that must answer,
    `set_aside` what must lie in versions/quarantine, and `note` is in what the Learning view says."""

    apply: Callable[[Path], None]
    answering: int
    set_aside: str | None
    note: str


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


V2 = Path("versions") / "v0002"
DAMAGES = {
    "truncated adapter weights": Damage(
        lambda root: _truncate(root / V2 / ADAPTER / "adapter_model.safetensors"), answering=1, set_aside="v0002",
        note="Planner v0002 was skipped at "),
    "adapter folder without its config": Damage(
        lambda root: (root / V2 / ADAPTER / "adapter_config.json").unlink(), answering=1, set_aside="v0002",
        note="its adapter folder has no adapter_config.json; it was moved to versions/quarantine/v0002, and v0001 "
             "answers instead"),
    "meta.json not JSON": Damage(
        lambda root: (root / V2 / "meta.json").write_text('{"number": 2, "status": "prom'), answering=1,
        set_aside="v0002", note="its meta.json is not JSON"),
    "meta.json with an unknown key": Damage(
        lambda root: _edit_json(root / V2 / "meta.json", retired_by="a newer app"), answering=2, set_aside=None,
        note="v0002's meta.json has keys this code does not know (retired_by): ignored (a newer version of the "
             "app wrote them)"),
    "current.json not JSON": Damage(
        lambda root: (root / "current.json").write_text('{"version": '), answering=0, set_aside="current-",
        note="current.json could not be used at "),
    "current.json with an unknown key": Damage(
        lambda root: _edit_json(root / "current.json", slot="blue"), answering=2, set_aside=None,
        note="current.json has keys this code does not know (slot): ignored"),
    "current.json naming a version that is not there": Damage(
        lambda root: _edit_json(root / "current.json", version=7), answering=2, set_aside="current-",
        note="it names v0007, which is not there; it was moved to versions/quarantine/current-"),
}


