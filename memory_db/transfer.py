"""JSON-lines export and validated import of one namespace's memories (and history).

Format: an optional header line {"format": "mia-memories", "version": 1, ...}, then one JSON
object per line with "type": "memory" (the fields of Memory) or "type": "history".
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from .errors import ImportFileError, InvalidMemoryError
from .records import MODALITIES, HistoryEntry, Memory, modality_for
from .rows import (
    check_provenance,
    check_question_type,
    check_summary,
    check_text,
    from_db_time,
    memory_from_json,
    to_db_time,
    utc_now,
)

FORMAT_NAME = "mia-memories"
FORMAT_VERSION = 1
MAX_LINE_BYTES = 1_000_000
MEMORY_FIELDS = {
    "type", "id", "namespace", "question", "caption", "summary", "plan", "correct", "question_type",
    "modality", "usage_count", "success_count", "win_rate", "pinned", "provenance", "created_at", "updated_at",
}
HISTORY_FIELDS = {"type", "id", "memory_id", "namespace", "action", "before", "after", "actor", "created_at"}
HISTORY_ACTIONS = {"add", "replace", "merge", "edit", "relabel", "pin", "unpin", "delete", "evict", "undo", "import"}


@dataclass
class ParsedImport:
    memories: list[Memory] = field(default_factory=list)
    line_numbers: list[int] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)  # rows for memory_history (no namespace)


@contextmanager
def _opened(fp: IO | str | Path, mode: str):
    if isinstance(fp, (str, Path)):
        with open(fp, mode, encoding="utf-8") as handle:
            yield handle
    else:
        yield fp


def write_export(fp: IO | str | Path, namespace: str, stored: Iterable[Memory],
                 history: Iterable[HistoryEntry]) -> None:
    with _opened(fp, "w") as out:
        header = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "namespace": namespace,
                  "exported_at": utc_now().isoformat()}
        out.write(json.dumps(header) + "\n")
        for memory in stored:
            out.write(json.dumps({"type": "memory", **memory.to_json_dict()}, ensure_ascii=False) + "\n")
        for entry in history:
            out.write(json.dumps({
                "type": "history", "id": entry.id, "memory_id": entry.memory_id, "namespace": entry.namespace,
                "action": entry.action, "before": entry.before, "after": entry.after, "actor": entry.actor,
                "created_at": entry.created_at.isoformat(),
            }, ensure_ascii=False) + "\n")


def _lines(handle: IO) -> Iterable[tuple[int, str]]:
    """(line number, text) pairs; refuses a line over MAX_LINE_BYTES without reading it whole."""
    number = 0
    while True:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if isinstance(line, bytes):
            if len(line) > MAX_LINE_BYTES:
                raise ImportFileError(number, f"the line is longer than {MAX_LINE_BYTES} bytes")
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ImportFileError(number, f"the line is not UTF-8 ({exc.reason})") from exc
        elif len(line) > MAX_LINE_BYTES or len(line.encode("utf-8")) > MAX_LINE_BYTES:
            raise ImportFileError(number, f"the line is longer than {MAX_LINE_BYTES} bytes")
        yield number, line


def read_import_file(fp: IO | str | Path, namespace: str) -> ParsedImport:
    """Parse and validate a whole export; memories land in `namespace` whatever the file says."""
    parsed = ParsedImport()
    seen_ids: dict[str, int] = {}
    with _opened(fp, "r") as handle:
        try:
            for number, line in _lines(handle):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ImportFileError(number, f"the line is not valid JSON ({exc.msg})") from exc
                if not isinstance(record, dict):
                    raise ImportFileError(number, "each line must be a JSON object")
                if "format" in record:
                    _check_header(number, record)
                    continue
                kind = record.get("type", "memory")
                try:
                    if kind == "memory":
                        memory = _memory_from_record(record, namespace)
                        if memory.id in seen_ids:
                            raise InvalidMemoryError(
                                f"memory id {memory.id!r} appears twice (first on line {seen_ids[memory.id]})")
                        seen_ids[memory.id] = number
                        parsed.memories.append(memory)
                        parsed.line_numbers.append(number)
                    elif kind == "history":
                        parsed.history.append(_history_from_record(record))
                    else:
                        raise InvalidMemoryError(f"unknown record type {kind!r} (use 'memory' or 'history')")
                except ImportFileError:
                    raise
                except (InvalidMemoryError, KeyError, TypeError, ValueError) as exc:
                    raise ImportFileError(number, str(exc).rstrip(".")) from exc
        except UnicodeDecodeError as exc:
            raise ImportFileError(0, f"the file is not UTF-8 ({exc.reason})") from exc
    return parsed


def _check_header(number: int, record: dict) -> None:
    if record.get("format") != FORMAT_NAME or record.get("version") != FORMAT_VERSION:
        raise ImportFileError(number, f"unknown format {record.get('format')!r} version "
                                      f"{record.get('version')!r}; expected {FORMAT_NAME!r} version {FORMAT_VERSION}")


def _require(record: dict, name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in record:
        raise InvalidMemoryError(f"field {name!r} is missing")
    value = record[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InvalidMemoryError(f"field {name!r} must be {expected}, got {type(value).__name__}")
    return value


def _timestamp(record: dict, name: str) -> datetime:
    if name not in record:
        return utc_now()
    value = _require(record, name, str)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidMemoryError(f"field {name!r} is not an ISO timestamp: {value!r:.40}") from exc
    if moment.tzinfo is None:
        raise InvalidMemoryError(f"field {name!r} has no time zone: {value!r:.40}")
    return from_db_time(moment)


def _memory_from_record(record: dict, namespace: str) -> Memory:
    unknown = set(record) - MEMORY_FIELDS
    if unknown:
        raise InvalidMemoryError(f"unknown field(s) {', '.join(sorted(unknown))}")
    memory_id = _require(record, "id", str)
    try:
        uuid.UUID(memory_id)
    except ValueError as exc:
        raise InvalidMemoryError(f"field 'id' must be a UUID, got {memory_id!r:.40}") from exc
    question = check_text("question", _require(record, "question", str))
    caption = record.get("caption")
    if caption is not None:
        check_text("caption", caption)
    modality = record.get("modality", modality_for(caption))
    if modality not in MODALITIES or modality != modality_for(caption):
        raise InvalidMemoryError(f"field 'modality' is {modality!r} but the caption makes it {modality_for(caption)!r}")
    usage = record.get("usage_count", 1)
    success = record.get("success_count", 1)
    for name, value in (("usage_count", usage), ("success_count", success)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidMemoryError(f"field {name!r} must be an integer")
    if not 0 <= success <= usage or usage < 1:
        raise InvalidMemoryError(f"counts must satisfy 0 <= success_count <= usage_count and usage_count >= 1, "
                                 f"got {success}/{usage}")
    pinned = record.get("pinned", False)
    if not isinstance(pinned, bool):
        raise InvalidMemoryError("field 'pinned' must be true or false")
    return Memory(
        id=memory_id, namespace=namespace, question=question, caption=caption,
        summary=check_summary(_require(record, "summary", str)),
        plan=check_text("plan", _require(record, "plan", str), allow_empty=True),
        correct=_require(record, "correct", bool),
        question_type=check_question_type(record.get("question_type", "others")),
        modality=modality, usage_count=usage, success_count=success, win_rate=success / usage,
        pinned=pinned, provenance=check_provenance(record.get("provenance", {})),
        created_at=_timestamp(record, "created_at"), updated_at=_timestamp(record, "updated_at"),
    )


def _history_from_record(record: dict) -> dict[str, Any]:
    unknown = set(record) - HISTORY_FIELDS
    if unknown:
        raise InvalidMemoryError(f"unknown field(s) {', '.join(sorted(unknown))}")
    action = _require(record, "action", str)
    if action not in HISTORY_ACTIONS:
        raise InvalidMemoryError(f"unknown history action {action!r}")
    snapshots = {}
    for name in ("before", "after"):
        value = record.get(name)
        if value is not None:
            if not isinstance(value, dict):
                raise InvalidMemoryError(f"field {name!r} must be an object or null")
            memory_from_json({**value, "namespace": value.get("namespace", "")})  # must be a full snapshot
        snapshots[name] = value
    return {
        "memory_id": _require(record, "memory_id", str), "action": action,
        "before": snapshots["before"], "after": snapshots["after"],
        "actor": _require(record, "actor", str)[:200],
        "created_at": to_db_time(_timestamp(record, "created_at")),
    }
