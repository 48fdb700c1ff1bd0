"""The sandbox wiki's dense vectors for the command line, built by a process of their own.

Embedding the whole wiki takes 20-60 minutes on 2 cores. `python -m app ask` answers with BM25 while
they are missing and starts `python -m app prepare --search-only --background`, a nice'd process that
outlives it and caches the vectors beside the index; a later `ask` finds them and searches hybrid.
One build runs at a time, the web app's included (backend.tools.dense_build): `prepare` in the
foreground waits for a running build instead of embedding the wiki a second time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from backend.config import Config
from backend.tools import dense_build

REPO_ROOT = Path(__file__).resolve().parent.parent
BACKGROUND_NICE = 10
SEARCH_LINE = "Search: BM25 only; dense vectors are being built (python -m app prepare builds them now)"


def dense_vectors_ready(config: Config) -> bool:
    """Whether the search the configuration asks for is ready: BM25 alone, or its dense vectors cached."""
    from backend.tools.wiki_index import dense_vectors_cached
    from memory_db import get_embedder

    return not config.search.hybrid or dense_vectors_cached(config.index_cache_dir, get_embedder())


def log_path(config: Config) -> Path:
    return config.index_cache_dir / "dense-build.log"


def build_running(config: Config) -> bool:
    """Whether a process (or the web app's thread) is building the dense vectors now."""
    return dense_build.build_running(config.index_cache_dir)


def builder_pid(config: Config) -> int | None:
    return dense_build.builder_pid(config.index_cache_dir)


def start_background_build(config_path: str | None, config: Config) -> subprocess.Popen:
    """`python -m app prepare --search-only --background`, detached from this process (it goes on
    after `ask` exits), its output appended to the log beside the index. It reads the same
    configuration: it runs in this working folder with `config_path` and the environment passed on."""
    command = [sys.executable, "-m", "app", *(["--config", config_path] if config_path else []),
               "prepare", "--search-only", "--background"]
    importable = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    log = log_path(config)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as output:
        return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONPATH": importable}, start_new_session=True)


def build_search_index(config: Config, *, background: bool) -> str:
    """Build the wiki's search index, its dense vectors included, and say what happened. In the
    background: at a lower CPU priority, and not at all when another build is running."""
    from backend.tools.wiki_index import WikiIndex
    from memory_db import get_embedder

    if background:
        os.nice(BACKGROUND_NICE)
    with dense_build.build_lock(config.index_cache_dir, wait=not background) as held:
        if not held:
            return f"Another process (pid {builder_pid(config)}) is building the dense vectors; nothing to do."
        embedder = get_embedder() if config.search.hybrid else None
        WikiIndex.load_or_build(config.index_cache_dir, progress=not background, embedder=embedder)
    return "The search index is ready" + (" with its dense vectors." if embedder is not None else " (BM25).")
