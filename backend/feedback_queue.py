"""The feedback queue: a durable JSON-lines file under the data directory that test-time learning
reads (by position: the learner keeps a cursor into `items()`).

Appends are whole lines, written with one write under a file lock and fsynced; a write that fails
(a full disk) is cut back off. A line torn by a power loss is the file's last, unterminated line:
readers skip it, and the next append moves it to `<queue>.torn` (kept, never lost) before writing.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

TORN_SUFFIX = ".torn"


class QueueWriteError(OSError):
    """The feedback could not be written to the queue; the message says what to do."""


@dataclass
class FeedbackItem:
    """One queued piece of feedback, as test-time learning reads it."""

    run_id: str
    namespace: str
    user: str
    question: str
    answer: str
    thumbs: str | None
    right_answer: str | None
    comment: str | None
    label_before: str
    label_after: str
    judge_method: str
    memory_id: str | None
    memories_used: list[str] = field(default_factory=list)
    at: float = field(default_factory=time.time)
    feedback_id: str = ""  # the key its memory changes are recorded under (empty in older lines)


class FeedbackQueue:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.torn_path = self.path.with_name(self.path.name + TORN_SUFFIX)
        self._lock = threading.Lock()  # the file lock orders processes; this one orders threads

    def append(self, item: FeedbackItem) -> int:
        """Write `item` durably; returns how many items of its namespace the queue holds now."""
        line = (json.dumps(asdict(item), ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
                self._set_torn_line_aside(descriptor)
                size = os.fstat(descriptor).st_size
                try:
                    _write_all(descriptor, line)
                    os.fsync(descriptor)
                except OSError as problem:
                    os.ftruncate(descriptor, size)  # never leave a torn line of our own
                    raise QueueWriteError(
                        f"The feedback could not be saved in {self.path} ({problem.strerror or problem}); "
                        "free some disk space and send it again."
                    ) from problem
            finally:
                os.close(descriptor)  # releases the file lock
        return self.count(item.namespace)

    def _set_torn_line_aside(self, descriptor: int) -> None:
        """Move an unterminated last line (a write cut short) to the .torn file, so the new line
        does not run into it."""
        size = os.fstat(descriptor).st_size
        if size == 0 or os.pread(descriptor, 1, size - 1) == b"\n":
            return
        start = size
        while start > 0:
            chunk = os.pread(descriptor, min(65536, start), max(0, start - 65536))
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                start = start - len(chunk) + cut + 1
                break
            start -= len(chunk)
        torn = os.pread(descriptor, size - start, start)
        with open(self.torn_path, "ab") as kept:
            kept.write(torn + b"\n")
            kept.flush()
            os.fsync(kept.fileno())
        os.ftruncate(descriptor, start)

    def _lines(self) -> tuple[list[bytes], bool]:
        """The complete lines, and whether an unterminated (torn) last line was left out."""
        with self._lock:
            if not self.path.exists():
                return [], False
            lines = self.path.read_bytes().split(b"\n")
        torn = lines.pop()  # after the last newline: empty unless the last write was cut short
        return lines, bool(torn.strip())

    def items(self, namespace: str | None = None, *, skip_damaged: bool = False) -> list[FeedbackItem]:
        """The queued items in order (of one namespace, or all). A torn last line is always left out;
        a damaged complete line raises (json.JSONDecodeError, TypeError, ...) unless `skip_damaged`."""
        found = []
        for line in self._lines()[0]:
            if not line.strip():
                continue
            try:
                found.append(_item_from_line(line))
            except (ValueError, TypeError):
                if not skip_damaged:
                    raise
        return [i for i in found if namespace is None or i.namespace == namespace]

    def damage(self) -> list[str]:
        """Sentences on what readers skip: damaged lines, a torn last line, torn lines set aside."""
        lines, torn = self._lines()
        problems = []
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    _item_from_line(line)
                except (ValueError, TypeError) as problem:
                    problems.append(f"line {number} of {self.path.name} is damaged ({problem}) and is skipped")
        if torn:
            problems.append(f"the last line of {self.path.name} was cut short (a crash or a full disk) and is "
                            f"skipped; the next feedback moves it to {self.torn_path.name}")
        if self.torn_path.exists():
            kept = sum(1 for line in self.torn_path.read_bytes().split(b"\n") if line.strip())
            problems.append(f"{kept} line{'s' if kept != 1 else ''} cut short earlier {'are' if kept != 1 else 'is'} "
                            f"kept in {self.torn_path.name}")
        return problems

    def count(self, namespace: str | None = None) -> int:
        return len(self.items(namespace, skip_damaged=True))

    def __len__(self) -> int:
        return self.count()


def _item_from_line(line: bytes) -> FeedbackItem:
    data = json.loads(line.decode("utf-8"))
    if not isinstance(data, dict):
        raise TypeError(f"a queue line must be a JSON object, not {type(data).__name__}")
    return FeedbackItem(**data)


def _write_all(descriptor: int, data: bytes) -> None:
    written = 0
    while written < len(data):
        written += os.write(descriptor, data[written:])


def feedback_queue_for(data_dir: Path) -> FeedbackQueue:
    return FeedbackQueue(Path(data_dir) / "feedback" / "ttrl-queue.jsonl")
