"""Read the key-value metadata of a GGUF file quickly (gguf.GGUFReader takes seconds on a 49k vocab).

Only the header and the metadata section are read; tensors are skipped.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from backend.llm.base import LLMError

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


@dataclass
class GGUFField:
    value: object  # str, int, float, bool or a list of them
    value_type: int  # gguf.GGUFValueType number
    item_type: int | None = None  # for arrays


def read_gguf_metadata(path: Path) -> dict[str, object]:
    """All metadata of a GGUF (version 2 or 3) as plain Python values: str, int, float, bool, lists."""
    return {key: field.value for key, field in read_gguf_fields(path).items()}


def read_gguf_fields(path: Path) -> dict[str, GGUFField]:
    """All metadata of a GGUF with the value types needed to write it again."""
    with open(path, "rb") as file:
        return _read_fields(file, path)[1]


def read_gguf_parameter_count(path: Path) -> int:
    """How many weights the GGUF's tensors hold, from the tensor infos after the metadata (no tensor data is read)."""
    with open(path, "rb") as file:
        tensor_count, _ = _read_fields(file, path)
        total = 0
        for _ in range(tensor_count):
            _read_string(file)
            total += math.prod(_unpack(file, "<Q") for _ in range(_unpack(file, "<I")))
            _unpack(file, "<I"), _unpack(file, "<Q")  # the tensor's type and data offset
        return total


def _read_fields(file: BinaryIO, path: Path) -> tuple[int, dict[str, GGUFField]]:
    """The header and the metadata: (tensor count, fields); the file is left at the tensor infos."""
    magic, version = file.read(4), _unpack(file, "<I")
    if magic != b"GGUF" or version not in (2, 3):
        raise LLMError(f"{path} is not a GGUF v2/v3 file; point the setting at a .gguf model file.")
    tensor_count, kv_count = _unpack(file, "<Q"), _unpack(file, "<Q")
    metadata = {}
    for _ in range(kv_count):
        key, value_type = _read_string(file), _unpack(file, "<I")
        if value_type == _ARRAY:
            item_type, count = _unpack(file, "<I"), _unpack(file, "<Q")
            metadata[key] = GGUFField(_read_array(file, item_type, count), value_type, item_type)
        else:
            metadata[key] = GGUFField(_read_value(file, value_type), value_type)
    return tensor_count, metadata


def _unpack(file: BinaryIO, fmt: str):
    size = struct.calcsize(fmt)
    data = file.read(size)
    if len(data) != size:
        raise LLMError(f"The GGUF file {file.name} ends early; it is truncated, download or reinstall it.")
    return struct.unpack(fmt, data)[0]


def _read_string(file: BinaryIO) -> str:
    return file.read(_unpack(file, "<Q")).decode("utf-8", errors="replace")


def _read_value(file: BinaryIO, value_type: int):
    if value_type == _STRING:
        return _read_string(file)
    if value_type == _ARRAY:
        return _read_array(file, _unpack(file, "<I"), _unpack(file, "<Q"))
    if value_type in _SCALARS:
        return _unpack(file, _SCALARS[value_type])
    raise LLMError(f"The GGUF file {file.name} has an unknown value type {value_type}; it may be corrupt.")


def _read_array(file: BinaryIO, item_type: int, count: int) -> list:
    if item_type in _SCALARS:  # one read for the whole array
        fmt = _SCALARS[item_type]
        return list(struct.unpack(f"<{count}{fmt[1]}", file.read(count * struct.calcsize(fmt))))
    return [_read_value(file, item_type) for _ in range(count)]
