"""One build of the wiki's dense vectors at a time, whichever process builds them.

Embedding the whole wiki takes 20-60 minutes on 2 cores. The web app builds the vectors on a thread
while it answers with BM25, the command line in a nice'd process of its own (app/vector_build.py),
`prepare` in the foreground: each holds a lock file beside the index (with its pid in it) while it
embeds, so a second builder waits for the first and then loads the vectors it cached.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def lock_path(cache_dir: Path) -> Path:
    return Path(cache_dir) / "dense-build.lock"


@contextmanager
def build_lock(cache_dir: Path, *, wait: bool, on_wait: Callable[[int | None], None] | None = None) -> Iterator[bool]:
    """Holds the one-build-at-a-time lock while the block runs, with this process's pid in it. When
    another holder has it: with `wait`, calls `on_wait(its pid)` and waits; without, yields False."""
    path = lock_path(cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False
                return
            if on_wait is not None:
                on_wait(builder_pid(cache_dir))
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield True
        finally:
            handle.truncate(0)  # the pid of a build that ended is no one's
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_running(cache_dir: Path) -> bool:
    """Whether another holder has the build lock now."""
    path = lock_path(cache_dir)
    if not path.exists():
        return False
    with open(path, encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def builder_pid(cache_dir: Path) -> int | None:
    """The pid of the process building the vectors, as its lock file says; None when it says none."""
    try:
        text = lock_path(cache_dir).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None
