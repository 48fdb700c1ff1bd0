"""JSON-lines export and validated import of one namespace's memories (and history).

Format: an optional header line {"format": "mia-memories", "version": 1, ...}, then one JSON
object per line with "type": "memory" (the fields of Memory) or "type": "history".

An import trusts nothing of the file's own: everything lands in the importer's namespace, the
importer is the actor of every history entry it brings (the name the file gives is kept beside it,
marked as the file's), and every text in it is held to the caller's length limit.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from .errors import ImportFileError, InvalidMemoryError
from .records import HistoryEntry, Memory
from .rows import to_db_time, utc_now
from .snapshots import memory_from_record
from .validation import MAX_JSON_DEPTH, check_memory_id, check_text, check_timestamp

FORMAT_NAME = "mia-memories"
FORMAT_VERSION = 1
MAX_LINE_BYTES = 1_000_000
MAX_INTEGER_DIGITS = 20  # longer integer literals are refused by field, before Python's own limit
HISTORY_FIELDS = {"type", "id", "memory_id", "namespace", "action", "before", "after", "actor", "created_at"}
MAX_ACTOR_CHARS = 200
HISTORY_ACTIONS = {"add", "replace", "merge", "outcome", "edit", "relabel", "pin", "unpin", "delete", "evict", "undo", "import",
                   "strike", "unstrike"}


@dataclass
class ParsedImport:
    memories: list[Memory] = field(default_factory=list)
    line_numbers: list[int] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)  # rows for memory_history


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


class LongIntegerLiteral:
    """Stands for an integer literal too long to be any field's value, so the field that holds it
    is named when it is validated (Python's own limit would stop the whole line unnamed)."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"a {self.digits}-digit integer"


def _integer(literal: str) -> int | LongIntegerLiteral:
    return int(literal) if len(literal) <= MAX_INTEGER_DIGITS else LongIntegerLiteral(len(literal.lstrip("-")))


def _field_nested_too_deep(line: str) -> str:
    """The key path at which `line` nests deeper than MAX_JSON_DEPTH (for the error message only;
    called after the parser gave up on a line nested far deeper than that)."""
    keys: list[str | None] = []  # per open container, the key being read in it
    in_string = escaped = False
    start, last_string = 0, ""
    for position, char in enumerate(line):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string, last_string = False, line[start:position]
        elif char == '"':
            in_string, start = True, position + 1
        elif char == ":" and keys:
            keys[-1] = last_string
        elif char in "[{":
            keys.append(None)
            if len(keys) > MAX_JSON_DEPTH + 1:
                break
        elif char in "]}" and keys:
            keys.pop()
    return ".".join(key for key in keys if key)[:120] or "(the line itself)"


def _parse_line(number: int, line: str) -> Any:
    try:
        return json.loads(line, parse_int=_integer)
    except json.JSONDecodeError as exc:
        raise ImportFileError(number, f"the line is not valid JSON ({exc.msg})") from exc
    except RecursionError:
        raise ImportFileError(number, f"field {_field_nested_too_deep(line)!r} is nested deeper than "
                                      f"{MAX_JSON_DEPTH} levels") from None


def read_import_file(fp: IO | str | Path, namespace: str, *, importer: str | None = None,
                     max_text_chars: int | None = None) -> ParsedImport:
    """Parse and validate a whole export; everything lands in `namespace` whatever the file says.
    `importer`: the actor of every history entry (None: the file's own names, for a preview that
    stores nothing). `max_text_chars`: the longest text (question, summary, plan, caption, a
    provenance string, an actor) the file may hold; a longer one rejects the file."""
    parsed = ParsedImport()
    seen_ids: dict[str, int] = {}
    now = utc_now()
    with _opened(fp, "r") as handle:
        try:
            for number, line in _lines(handle):
                if not line.strip():
                    continue
                record = _parse_line(number, line)
                if not isinstance(record, dict):
                    raise ImportFileError(number, "each line must be a JSON object")
                if "format" in record:
                    _check_header(number, record)
                    continue
                kind = record.get("type", "memory")
                try:
                    if max_text_chars is not None:
                        _check_text_lengths(record, max_text_chars)
                    if kind == "memory":
                        memory = memory_from_record(record, namespace=namespace, now=now)
                        if memory.id in seen_ids:
                            raise InvalidMemoryError(
                                f"memory id {memory.id!r} appears twice (first on line {seen_ids[memory.id]})")
                        seen_ids[memory.id] = number
                        parsed.memories.append(memory)
                        parsed.line_numbers.append(number)
                    elif kind == "history":
                        parsed.history.append(_history_from_record(record, namespace, now, importer))
                    else:
                        raise InvalidMemoryError(f"unknown record type {kind!r:.40} (use 'memory' or 'history')")
                except (InvalidMemoryError, KeyError, TypeError, ValueError, ArithmeticError) as exc:
                    raise ImportFileError(number, str(exc).rstrip(".")) from exc
        except UnicodeDecodeError as exc:
            raise ImportFileError(0, f"the file is not UTF-8 ({exc.reason})") from exc
    return parsed


def _check_text_lengths(record: dict, max_chars: int) -> None:
    """Every string in `record`, however deep, is at most `max_chars` characters long."""
    pending: list[tuple[Any, str]] = [(value, str(key)) for key, value in record.items()]
    while pending:
        value, path = pending.pop()
        if isinstance(value, str) and len(value) > max_chars:
            raise InvalidMemoryError(f"field {path!r:.120} is {len(value):,} characters long; the limit is "
                                     f"{max_chars:,}, as for a question to the agent")
        if isinstance(value, dict):
            pending.extend((inner, f"{path}.{key}") for key, inner in value.items())
        elif isinstance(value, list):
            pending.extend((inner, f"{path}[{i}]") for i, inner in enumerate(value))


def imported_actor(importer: str, recorded: str) -> str:
    """The actor of a history entry an import brings: the importer, with the name the file gives
    kept beside it as the file's claim (never as who acted here)."""
    if not recorded.strip():
        return importer[:MAX_ACTOR_CHARS]
    prefix = f"{importer} (the file says "
    return prefix + recorded[:max(0, MAX_ACTOR_CHARS - len(prefix) - 1)] + ")"


def _check_header(number: int, record: dict) -> None:
    if record.get("format") != FORMAT_NAME or record.get("version") != FORMAT_VERSION:
        raise ImportFileError(number, f"unknown format {record.get('format')!r:.40} version "
                                      f"{record.get('version')!r:.20}; expected {FORMAT_NAME!r} version {FORMAT_VERSION}")


def _require(record: dict, name: str, kind: type) -> Any:
    if name not in record:
        raise InvalidMemoryError(f"field {name!r} is missing")
    value = record[name]
    if not isinstance(value, kind):
        raise InvalidMemoryError(f"field {name!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


def _history_time(record: dict) -> datetime:
    value = _require(record, "created_at", str)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidMemoryError(f"field 'created_at' is not an ISO timestamp: {value!r:.40}") from None
    if moment.tzinfo is None:
        raise InvalidMemoryError(f"field 'created_at' has no time zone: {value!r:.40}")
    return check_timestamp("created_at", moment)


def _history_from_record(record: dict, namespace: str, now: datetime, importer: str | None) -> dict[str, Any]:
    """A memory_history row for `namespace`: its snapshots are validated as memories of that
    namespace and of the entry's own memory id, whatever namespace or id they name themselves;
    its actor is `importer` (see imported_actor) unless None."""
    unknown = set(record) - HISTORY_FIELDS
    if unknown:
        raise InvalidMemoryError(f"unknown field(s) {', '.join(sorted(map(str, unknown)))[:200]}")
    action = _require(record, "action", str)
    if action not in HISTORY_ACTIONS:
        raise InvalidMemoryError(f"unknown history action {action!r:.40}")
    memory_id = _require(record, "memory_id", str)
    try:
        check_memory_id(memory_id)
    except InvalidMemoryError:
        raise InvalidMemoryError(f"field 'memory_id' must be a UUID, got {memory_id!r:.40}") from None
    snapshots: dict[str, dict | None] = {}
    for name in ("before", "after"):
        value = record.get(name)
        if value is None:
            snapshots[name] = None
            continue
        if not isinstance(value, dict):
            raise InvalidMemoryError(f"field {name!r} must be an object or null")
        try:
            snapshot = memory_from_record(value, namespace=namespace, now=now, memory_id=memory_id, complete=True)
        except InvalidMemoryError as exc:
            raise InvalidMemoryError(f"history {name!r} snapshot: {str(exc).rstrip('.')}") from exc
        snapshots[name] = snapshot.to_json_dict()
    recorded = check_text("actor", _require(record, "actor", str), allow_empty=True)
    return {
        "memory_id": memory_id, "namespace": namespace, "action": action,
        "before": snapshots["before"], "after": snapshots["after"],
        "actor": imported_actor(importer, recorded) if importer is not None else recorded[:MAX_ACTOR_CHARS],
        "created_at": to_db_time(_history_time(record)),
    }
