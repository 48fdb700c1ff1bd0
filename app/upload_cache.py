"""Gradio's upload cache, under the data folder and bounded.

Every upload, every export and report the app writes for a user, and every copy of a source opened
lands in Gradio's cache. The app puts that cache in the data folder (`use_upload_cache`), deletes
an upload it has rejected or consumed at once (app/user_files.py), and sweeps the rest periodically:
a file its user downloaded DOWNLOADED_GRACE_S ago or more goes, as does one older than `max_age_s`,
and while the cache holds more than `max_bytes`, the oldest file goes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import anyio

from app.user_files import UserFiles

log = logging.getLogger(__name__)

CACHE_FOLDER = "upload-cache"
SWEEP_EVERY_S = 60.0
# A folder is made just before its file is written (an upload's, a user's own), and an upload starts
# as an empty file in the cache's top folder: empty ones are left alone this long, so that the sweep
# never takes one from under a file about to land. After it, an empty file there is a leftover (Gradio's
# gr.File(type="filepath") leaves one behind on every call) and goes, as does an empty folder.
EMPTY_GRACE_S = 60.0
# A downloaded file stays this long, so that a second click on its link (a download the browser lost)
# still finds it.
DOWNLOADED_GRACE_S = 60.0


def use_upload_cache(data_dir: Path | str) -> Path:
    """Point this process's Gradio cache at `data_dir`/upload-cache (Gradio reads GRADIO_TEMP_DIR
    each time it names its cache, so call this before the app is built)."""
    folder = (Path(data_dir) / CACHE_FOLDER).resolve()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ["GRADIO_TEMP_DIR"] = str(folder)
    return folder


@dataclass(frozen=True)
class SweepReport:
    deleted: tuple[Path, ...]
    deleted_bytes: int
    kept_files: int
    kept_bytes: int


@dataclass(frozen=True)
class _CachedFile:
    path: Path
    size: int
    modified: float


class UploadCache:
    """The sweep of one cache folder. `files`: the app's records of whose each file is (which files
    were downloaded; the records of each file deleted are dropped); `clock`: seconds since the epoch,
    as file times are."""

    def __init__(self, root: Path | str, *, max_bytes: int, max_age_s: float, files: UserFiles | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.root = Path(root).resolve()
        self.max_bytes, self.max_age_s = max_bytes, max_age_s
        self._records, self._clock = files, clock

    def _files(self) -> tuple[list[_CachedFile], list[_CachedFile]]:
        files, folders = [], []
        for folder, subfolders, names in os.walk(self.root):  # links are listed, never followed
            for name in subfolders:
                path = Path(folder) / name
                try:
                    folders.append(_CachedFile(path, 0, path.lstat().st_mtime))
                except FileNotFoundError:
                    continue
            for name in names:
                path = Path(folder) / name
                try:
                    stat = path.lstat()
                except FileNotFoundError:
                    continue
                files.append(_CachedFile(path, stat.st_size, stat.st_mtime))
        return files, folders

    def _delete(self, cached: _CachedFile) -> bool:
        try:
            cached.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("the upload cache's sweep could not delete %s: %s", cached.path, exc)
            return False
        if self._records is not None:
            self._records.forget(cached.path)
        return True

    def sweep(self) -> SweepReport:
        """Delete the downloaded files past their grace, what is older than max_age_s and the empty
        leftovers past their grace, then the oldest files while more than max_bytes are kept, then
        the folders left empty that were last changed before their grace."""
        now = self._clock()
        files, folders = self._files()
        downloaded = self._records.downloaded_before(now - DOWNLOADED_GRACE_S) if self._records else set()
        kept, deleted = [], []
        for cached in sorted(files, key=lambda f: f.modified):
            leftover = cached.size == 0 and cached.path.parent == self.root and now - cached.modified > EMPTY_GRACE_S
            done = leftover or cached.path in downloaded or now - cached.modified > self.max_age_s
            if done and self._delete(cached):
                deleted.append(cached)
            else:
                kept.append(cached)
        kept_bytes = sum(f.size for f in kept)
        while kept and kept_bytes > self.max_bytes:
            oldest = kept.pop(0)
            if self._delete(oldest):
                deleted.append(oldest)
                kept_bytes -= oldest.size
        # the deepest first; a folder's age is from before this sweep emptied it
        for folder in sorted(folders, key=lambda f: len(f.path.parts), reverse=True):
            if now - folder.modified > EMPTY_GRACE_S:
                with suppress(OSError):  # not empty, or gone
                    folder.path.rmdir()
        return SweepReport(tuple(f.path for f in deleted), sum(f.size for f in deleted), len(kept), kept_bytes)

    def lifespan(self, every_s: float = SWEEP_EVERY_S):
        """A server lifespan (Gradio's app_kwargs["lifespan"]) that sweeps at start and every `every_s`."""

        async def sweep_now() -> None:
            try:
                report = await anyio.to_thread.run_sync(self.sweep)
            except OSError as exc:
                log.warning("the upload cache's sweep of %s failed: %s", self.root, exc)
                return
            if report.deleted:
                log.info("upload cache: deleted %d files (%d bytes); %d files (%d bytes) kept", len(report.deleted),
                         report.deleted_bytes, report.kept_files, report.kept_bytes)

        async def sweeping() -> None:
            while True:
                await sweep_now()
                await asyncio.sleep(every_s)

        @asynccontextmanager
        async def running(_app):
            task = asyncio.create_task(sweeping())
            try:
                yield
            finally:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task

        return running
