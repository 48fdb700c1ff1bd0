"""One JSONL row per evaluated question, appended as soon as the question is done.

The file is the source of truth: summaries and comparisons are computed from it alone. Reopening
it after an interruption keeps every complete row and drops a half-written last line; any other
line that is not a whole row of known kinds, or a second row for a question, is refused with the
file and the line, so that no summary counts a question twice or a damaged row at all.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

log = logging.getLogger(__name__)

FAILED = "failed"  # the verdict of a question whose run stopped with an error


class ResultsError(ValueError):
    """A results file is damaged beyond its last line; the message says which line to fix."""


@dataclass
class EvalRow:
    index: int  # position in the stream, from 0
    id: str
    question: str
    gold: str
    answer: str
    verdict: str  # "correct" | "incorrect" | "not_attempted" | "failed"
    judge_method: str
    correct: bool
    em: float
    f1: float
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    tool_calls: int
    wall_seconds: float  # the agent's own measure of the run, split into the next three
    llm_seconds: float
    tool_seconds: float
    other_seconds: float  # framework overhead: neither an LLM call nor a tool
    harness_seconds: float  # the harness's clock around the whole run, events included
    memories_used: int
    memory_ids: list[str] = field(default_factory=list)
    memory_stored: str | None = None
    forced_answer: bool = False
    forced_reason: str = ""  # why the answer was forced (turn cap, time limit, budget)
    method: str = ""
    run_id: str = ""
    error: str | None = None
    calls_by_role: dict[str, int] = field(default_factory=dict)
    cached_prompt_tokens: int = 0  # of prompt_tokens, read from a local model's prompt cache
    first_answer_seconds: float | None = None  # when the first answer was shown, from the run's start

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict) -> EvalRow:
        """The row `data` holds; a ValueError saying what is missing or of the wrong kind. Keys of no
        field (from other versions) are ignored."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        missing = [f.name for f in fields(cls) if f.name not in data
                   and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise ValueError(f"it lacks {', '.join(missing)}")
        for name, (fits, kind) in _FIELD_KINDS.items():
            if name in data and not fits(data[name]):
                raise ValueError(f"{name} must be {kind}, not {json.dumps(data[name])[:40]}")
        if data["index"] < 0:
            raise ValueError(f"index must be 0 or more, not {data['index']}")
        return cls(**{key: value for key, value in data.items() if key in _FIELD_KINDS})


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_KINDS = {  # a field's annotation -> (does a JSON value fit it, what it must be)
    "int": (_whole, "a whole number"),
    "float": (_number, "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "str": (lambda v: isinstance(v, str), "a text"),
    "str | None": (lambda v: v is None or isinstance(v, str), "a text or null"),
    "float | None": (lambda v: v is None or _number(v), "a number or null"),
    "list[str]": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of texts"),
    "dict[str, int]": (lambda v: isinstance(v, dict) and all(_whole(x) for x in v.values()),
                       "an object of whole numbers"),
}
# A field of a new annotation fails here, at import, until _KINDS says how to check it.
_FIELD_KINDS = {f.name: _KINDS[f.type] for f in fields(EvalRow)}


class ResultsFile:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self, *, repair: bool = True) -> list[EvalRow]:
        """Every complete row; a half-written last line (an interrupted write) is cut off the file.
        With `repair` off (a committed rows file, whose bytes a checksum names) the file is never
        written: a half-written last line is refused like any other damaged line."""
        if not self.path.exists():
            return []
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        last_text_line = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
        rows: list[EvalRow] = []
        lines_of_ids: dict[str, int] = {}
        lines_of_indexes: dict[int, int] = {}
        offset = 0
        for i, line in enumerate(lines):
            if line.strip():
                try:
                    data = json.loads(line)
                except ValueError as exc:
                    if i != last_text_line or not repair:
                        fix = ("remove that line to resume" if repair
                               else "a published table's rows are read as they are: copy the whole file again")
                        raise ResultsError(f"{self.path}, line {i + 1}: not a result row ({exc}); {fix}.") from None
                    # Rows are written whole with their newline, so only the last one can be partial.
                    log.warning("%s: dropping a half-written last line (%d bytes)", self.path, len(line))
                    self._truncate(offset)
                    return rows
                try:
                    row = EvalRow.from_dict(data)
                except ValueError as exc:
                    raise ResultsError(
                        f"{self.path}, line {i + 1}: not a complete result row ({exc}); remove that line and run "
                        "the evaluation again, which asks its question again."
                    ) from None
                for seen, key, what in ((lines_of_ids, row.id, f"question {row.id!r}"),
                                        (lines_of_indexes, row.index, f"position {row.index}")):
                    if key in seen:
                        raise ResultsError(
                            f"{self.path}, line {i + 1}: {what} already has a row on line {seen[key]}; "
                            "keep one of the two lines and remove the other."
                        )
                    seen[key] = i + 1
                rows.append(row)
            offset += len(line) + 1
        if repair and raw and not raw.endswith(b"\n"):
            with self.path.open("ab") as fp:  # the last row lacks only its newline
                fp.write(b"\n")
        return rows

    def _truncate(self, size: int) -> None:
        with self.path.open("r+b") as fp:
            fp.truncate(size)

    def append(self, row: EvalRow) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fp:
            fp.write(row.to_json() + "\n")
            fp.flush()
            os.fsync(fp.fileno())
