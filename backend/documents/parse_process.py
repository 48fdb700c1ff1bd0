"""One document read into passages in a child process, under its budget (mia.toml's `[documents]`).

The app never parses a user's bytes in its own process: a child forked from a server that has the
parsers loaded (milliseconds a document) takes a lower CPU priority, leads its own process group,
and caps its address space (`max_memory_mb` beyond what it starts with) and its processor time; at
the wall-clock deadline (`max_seconds`) the group, tesseract included, is killed. Pages, OCR calls
and passages are counted inside (backend.documents.budget). Whatever stops it, the caller gets an
`OverBudget` or `ParseError` sentence, and the other users' requests go on at full speed.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import resource
import signal
from multiprocessing.connection import Connection
from pathlib import Path

from backend.config import DocumentsConfig
from backend.documents.budget import Meter, OverBudget, too_large, too_slow
from backend.documents.errors import DocumentError, ParseError
from backend.documents.parsing import ParsedFile, file_format, parse_file
from backend.documents.passages import DocPassage, split_passages

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload([__name__])  # the server imports the parsers once; each child is a fork of it
EXIT_GRACE_S = 5.0  # after its answer the child only returns


def read_passages(path: Path, name: str, budget: DocumentsConfig, *, ocr_on: bool) -> tuple[ParsedFile, list[DocPassage]]:
    """The file's passages and what parsing it found (pages, OCR, warnings; its `sections` left
    empty), read in a child process under `budget`. Raises OverBudget or ParseError, naming the file."""
    kind = file_format(name)
    if kind is None:
        parse_file(path, name=name)  # raises its sentence naming the formats it reads
    receiver, sender = _CONTEXT.Pipe(duplex=False)
    child = _CONTEXT.Process(target=_read_in_child, args=(str(path), name, budget, ocr_on, sender), daemon=True,
                             name=f"read {name}")
    child.start()
    sender.close()
    try:
        if not receiver.poll(budget.max_seconds):
            _kill_group(child)
            raise _named(name, too_slow(budget, kind))
        try:
            outcome, value = receiver.recv()
        except EOFError:  # it died without a word: a limit's signal, or a crash in a C library
            child.join(EXIT_GRACE_S)
            _kill_group(child)
            raise _named(name, _stopped(budget, kind, child.exitcode)) from None
    finally:
        receiver.close()
    child.join(EXIT_GRACE_S)
    if child.exitcode is None:
        _kill_group(child)
    if outcome == "read":
        return value
    if outcome == "memory":
        raise _named(name, too_large(budget, kind))
    raise (OverBudget if outcome == "over budget" else ParseError)(value)


def _named(name: str, error: ParseError) -> ParseError:
    return type(error)(f"{name}: {error}")


def _stopped(budget: DocumentsConfig, kind: str, exitcode: int | None) -> ParseError:
    if exitcode == -signal.SIGXCPU:
        return too_slow(budget, kind)
    if exitcode in (-signal.SIGSEGV, -signal.SIGABRT, -signal.SIGKILL):  # a C library out of memory, or the kernel's OOM killer
        return too_large(budget, kind)
    return ParseError(f"the process reading it stopped unexpectedly (exit code {exitcode}); add it again, "
                      "or save it as PDF or plain text.")


def _kill_group(child) -> None:
    """Kill the child and what it started (tesseract): they share the group the child leads."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # gone already, or killed before it led a group
        child.kill()
    child.join(EXIT_GRACE_S)


def _read_in_child(path: str, name: str, budget: DocumentsConfig, ocr_on: bool, sender: Connection) -> None:
    os.setpgid(0, 0)
    os.nice(budget.worker_nice)
    address_space = _address_space() + budget.max_memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    # Processor time too, so that a child whose parent died (no one to keep its deadline) still stops.
    seconds = math.ceil(budget.max_seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
    try:
        sender.send(("read", _read(Path(path), name, budget, ocr_on)))
    except OverBudget as exc:
        sender.send(("over budget", str(exc)))
    except DocumentError as exc:
        sender.send(("failed", str(exc)))
    except MemoryError:
        sender.send(("memory", None))
    finally:
        sender.close()


def _read(path: Path, name: str, budget: DocumentsConfig, ocr_on: bool) -> tuple[ParsedFile, list[DocPassage]]:
    parsed = parse_file(path, name=name, ocr_on=ocr_on, budget=budget)
    passages = split_passages(parsed)
    try:
        Meter(budget, parsed.format).passages(len(passages))
    except OverBudget as exc:
        raise _named(name, exc) from None
    parsed.sections = []  # the passages hold the text; no need to send it twice
    return parsed, passages


def _address_space() -> int:
    """This process's virtual memory now, in bytes."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
