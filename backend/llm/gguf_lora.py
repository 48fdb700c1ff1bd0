"""A LoRA adapter trained with peft, written as a GGUF adapter that llama.cpp applies at run time.

Test-time learning trains the Planner's LoRA on a transformers copy of the GGUF's weights; the app
answers with llama.cpp. This module turns the peft folder (adapter_config.json +
adapter_model.safetensors) into llama.cpp's adapter format: for each adapted weight, a `.lora_a`
and a `.lora_b` tensor named after the base GGUF's tensor, and the scale `alpha` in the metadata
(llama.cpp scales by alpha / rank as peft does). Llama-architecture GGUFs store the query and key
projections with their rows permuted for llama.cpp's rotary layout, so those B matrices are
permuted the same way; Qwen2 stores them as transformers does.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np

from backend.llm.base import LLMError
from backend.llm.gguf_metadata import read_gguf_metadata

_MODULES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_PEFT_NAME = re.compile(r"(?:.*\.)?layers\.(\d+)\.(\w+\.\w+)\.lora_([AB])\.weight$")
_ROTARY_PERMUTED = {"llama"}  # architectures whose q/k rows the GGUF converter reorders


def _rotary_permute(rows: np.ndarray, heads: int) -> np.ndarray:
    """The row order llama.cpp's llama converter gives a q or k projection with `heads` heads."""
    return (rows.reshape(heads, 2, rows.shape[0] // heads // 2, *rows.shape[1:])
            .swapaxes(1, 2).reshape(rows.shape))


def gguf_tensor_name(peft_name: str) -> tuple[str, str]:
    """('blk.3.attn_q.weight', 'a') for peft's '...layers.3.self_attn.q_proj.lora_A.weight'."""
    match = _PEFT_NAME.match(peft_name)
    if not match or match.group(2) not in _MODULES:
        raise LLMError(f"The adapter tensor {peft_name!r} adapts no module llama.cpp knows "
                       f"(supported: {', '.join(_MODULES)}); train the LoRA on those modules only.")
    layer, module, which = match.groups()
    return f"blk.{layer}.{_MODULES[module]}.weight", which.lower()


def write_gguf_adapter(adapter_dir: Path, base_gguf: Path, out_path: Path) -> Path:
    """Convert the peft adapter in `adapter_dir` for the model in `base_gguf`; written atomically."""
    import gguf
    from safetensors.numpy import load_file

    adapter_dir, out_path = Path(adapter_dir), Path(out_path)
    config_path, weights_path = adapter_dir / "adapter_config.json", adapter_dir / "adapter_model.safetensors"
    if not config_path.is_file() or not weights_path.is_file():
        raise LLMError(f"{adapter_dir} is not a peft LoRA folder (adapter_config.json and "
                       "adapter_model.safetensors); the Planner version's adapter is incomplete.")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.get("use_rslora") or config.get("use_dora"):
        raise LLMError("rsLoRA and DoRA adapters have no llama.cpp form; train a plain LoRA.")
    alpha = float(config["lora_alpha"])
    metadata = read_gguf_metadata(base_gguf)
    arch = str(metadata["general.architecture"])
    heads = int(metadata[f"{arch}.attention.head_count"])
    kv_heads = int(metadata.get(f"{arch}.attention.head_count_kv", heads))
    tensors = load_file(str(weights_path))

    writer_tensors: dict[str, np.ndarray] = {}
    for peft_name in sorted(tensors):
        base_name, which = gguf_tensor_name(peft_name)
        value = tensors[peft_name].astype(np.float32)
        if which == "b" and arch in _ROTARY_PERMUTED and base_name.split(".")[2] in ("attn_q", "attn_k"):
            value = _rotary_permute(value, heads if base_name.split(".")[2] == "attn_q" else kv_heads)
        writer_tensors[f"{base_name}.lora_{which}"] = value
    for name in writer_tensors:
        partner = name[:-1] + ("b" if name.endswith("a") else "a")
        if partner not in writer_tensors:
            raise LLMError(f"The adapter has {name} without {partner}; the adapter file is damaged.")

    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=".adapter-", suffix=".gguf", dir=out_path.parent)
    os.close(fd)
    try:
        writer = gguf.GGUFWriter(temp_name, arch)
        writer.add_string(gguf.Keys.General.TYPE, gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
        for name, value in writer_tensors.items():
            writer.add_tensor(name, np.ascontiguousarray(value))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(temp_name, out_path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    return out_path
