"""Preparing a GGUF into a cached transformers folder, on a tiny random GGUF written for the test."""

from __future__ import annotations

import time

import pytest
import torch
from safetensors import safe_open

from backend.llm.base import LLMError
from backend.llm.embedded import EmbeddedChatModel
from backend.llm.gguf_import import (
    MANIFEST_NAME,
    TEMP_PREFIX,
    default_gguf_path,
    load_gguf_tokenizer,
    prepare_embedded_model,
    read_manifest,
)
from backend.llm.gguf_metadata import read_gguf_metadata, read_gguf_parameter_count
from tests.tiny_gguf import build_tiny_random_gguf


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    path, source_model = build_tiny_random_gguf(tmp_path_factory.mktemp("gguf") / "tiny-random.F32.gguf", seed=3)
    return path, source_model


@pytest.fixture(scope="module")
def prepared(tiny_gguf, tmp_path_factory):
    """Prepare once into a cache that holds leftovers of an interrupted run and an incomplete folder."""
    gguf_path, _ = tiny_gguf
    cache = tmp_path_factory.mktemp("cache")
    interrupted = cache / f"{TEMP_PREFIX}{gguf_path.stem}-killed"
    interrupted.mkdir()
    (interrupted / "config.json").write_text("{ half written")
    incomplete = cache / gguf_path.stem
    incomplete.mkdir()
    (incomplete / "config.json").write_text("{}")  # no manifest: never finished
    started = time.perf_counter()
    model_dir = prepare_embedded_model(cache, gguf_path=gguf_path, progress=False)
    return cache, model_dir, interrupted, time.perf_counter() - started


def test_prepare_writes_a_loadable_folder_with_the_gguf_weights(prepared, tiny_gguf):
    cache, model_dir, _, _ = prepared
    assert model_dir == cache / "tiny-random.F32"
    assert (model_dir / MANIFEST_NAME).is_file() and (model_dir / "model.safetensors").is_file()
    model = EmbeddedChatModel(model_dir)
    assert model.name == "embedded:tiny-random"
    ids = torch.tensor([[1, 9690, 198, 19556, 905, 2]])
    with torch.no_grad():
        assert torch.allclose(model.model(ids).logits, tiny_gguf[1](ids).logits, atol=1e-5)
    assert model.tokenizer.eos_token == "<|im_end|>"
    assert model.generate([{"role": "user", "content": "hi"}], max_new_tokens=3).completion_tokens == 3


def test_interrupted_and_incomplete_folders_never_count_as_prepared(prepared):
    cache, model_dir, interrupted, _ = prepared
    assert (model_dir / "config.json").read_text() != "{}"  # the incomplete folder was replaced
    assert (interrupted / "config.json").read_text() == "{ half written"  # someone else's temp: left alone
    assert sorted(p.name for p in cache.iterdir()) == sorted([interrupted.name, model_dir.name])


def test_a_second_prepare_returns_the_cached_folder_without_converting(prepared, tiny_gguf):
    cache, model_dir, _, first_seconds = prepared
    before = {p.name: p.stat().st_mtime_ns for p in model_dir.iterdir()}
    started = time.perf_counter()
    assert prepare_embedded_model(cache, gguf_path=tiny_gguf[0], progress=False) == model_dir
    seconds = time.perf_counter() - started
    assert seconds < first_seconds / 10
    assert {p.name: p.stat().st_mtime_ns for p in model_dir.iterdir()} == before


def test_a_missing_or_broken_gguf_gets_a_clear_error(tmp_path):
    with pytest.raises(LLMError, match="does not exist"):
        prepare_embedded_model(tmp_path, gguf_path=tmp_path / "nothing.gguf", progress=False)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf at all")
    with pytest.raises(LLMError, match="not a GGUF"):
        prepare_embedded_model(tmp_path / "cache", gguf_path=broken, progress=False)
    assert not any((tmp_path / "cache").iterdir())  # the failed attempt left nothing behind


def test_fast_metadata_reader_agrees_with_the_gguf_library():
    import gguf

    reader = gguf.GGUFReader(str(default_gguf_path()))
    metadata = read_gguf_metadata(default_gguf_path())
    expected = {key: field.contents() for key, field in reader.fields.items() if not key.startswith("GGUF.")}
    assert metadata.keys() == expected.keys()
    for key, value in expected.items():
        assert metadata[key] == (pytest.approx(value) if isinstance(value, float) else value), key


def test_gguf_tokenizer_matches_transformers_own_gguf_loading_except_the_fixed_eos():
    from transformers import AutoTokenizer

    path = default_gguf_path()
    ours = load_gguf_tokenizer(path)
    reference = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    for text in ["The capital of France is Paris.", "  two spaces\n\nand ü, 日本語 🤖", "<|im_start|>user\nhi<|im_end|>"]:
        assert ours(text).input_ids == reference(text).input_ids
    chat = [{"role": "user", "content": "hi"}]
    assert ours.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == \
        reference.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert (ours.eos_token, ours.pad_token, ours.bos_token) == ("<|im_end|>", "<|im_end|>", "<|im_start|>")


def test_a_bfloat16_copy_holds_half_the_bytes_beside_the_float32_one(tiny_gguf, tmp_path):
    """Test-time learning trains a bfloat16 copy: a folder of its own, its weights stored in bfloat16."""
    gguf_path, source_model = tiny_gguf
    float32_dir = prepare_embedded_model(tmp_path, gguf_path=gguf_path, progress=False)
    bfloat16_dir = prepare_embedded_model(tmp_path, gguf_path=gguf_path, progress=False, dtype="bfloat16")
    assert bfloat16_dir == tmp_path / "tiny-random.F32.bfloat16" and float32_dir == tmp_path / "tiny-random.F32"
    assert read_manifest(bfloat16_dir)["dtype"] == "bfloat16"
    with safe_open(bfloat16_dir / "model.safetensors", "pt") as weights:
        assert {weights.get_slice(name).get_dtype() for name in weights.keys()} == {"BF16"}
    assert (bfloat16_dir / "model.safetensors").stat().st_size < 0.6 * (float32_dir / "model.safetensors").stat().st_size
    model = EmbeddedChatModel(bfloat16_dir, dtype=torch.bfloat16)
    source = source_model.state_dict()
    for name, weight in model.model.state_dict().items():  # the GGUF's weights, rounded once to bfloat16
        assert weight.dtype == torch.bfloat16 and torch.equal(weight, source[name].to(torch.bfloat16)), name
    with pytest.raises(ValueError, match="float32, bfloat16"):
        prepare_embedded_model(tmp_path, gguf_path=gguf_path, progress=False, dtype="float16")


def test_the_parameter_count_is_read_from_the_tensor_infos(tiny_gguf):
    import gguf

    gguf_path, source_model = tiny_gguf
    assert read_gguf_parameter_count(gguf_path) == source_model.num_parameters()
    packaged = default_gguf_path()  # a quantised GGUF: counted in weights, not in bytes
    assert read_gguf_parameter_count(packaged) == sum(int(t.n_elements) for t in gguf.GGUFReader(str(packaged)).tensors)


def test_a_separate_process_prepares_the_same_folder_and_reports_its_failure(tiny_gguf, tmp_path):
    """The learner dequantises in a child process, so its own memory does not keep the conversion's peak."""
    gguf_path, source_model = tiny_gguf
    folder = prepare_embedded_model(tmp_path, gguf_path=gguf_path, progress=False, dtype="bfloat16",
                                    separate_process=True)
    assert folder == tmp_path / "tiny-random.F32.bfloat16" and read_manifest(folder)["dtype"] == "bfloat16"
    assert EmbeddedChatModel(folder, dtype=torch.bfloat16).model.num_parameters() == source_model.num_parameters()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 12)
    with pytest.raises(LLMError, match=r"Preparing broken.gguf as a bfloat16 transformers folder failed \(.+\)"):
        prepare_embedded_model(tmp_path / "cache", gguf_path=broken, progress=False, dtype="bfloat16",
                               separate_process=True)
