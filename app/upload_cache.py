"""Gradio's upload cache, under the data folder and bounded.

Every upload, every export and report the app writes for a user, and every copy of a source opened
lands in Gradio's cache. The app puts that cache in the data folder (`use_upload_cache`), deletes
an upload it has rejected or consumed at once (app/user_files.py), and sweeps the rest periodically:
a file its user downloaded DOWNLOADED_GRACE_S ago or more goes, as does one older than `max_age_s`,
and while the cache holds more than `max_bytes`, the oldest file goes.

The bound holds between sweeps too: an upload (`BoundedUploads`, ASGI middleware) is let in only
when the cache has room for its declared size beside the uploads being received. To make room the
oldest files go, but none younger than YOUNG_FILE_S (an upload its user is about to add, an export
about to be downloaded); when those alone fill the cache, the upload is refused with a sentence.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import anyio

from app.user_files import UPLOAD_ROUTE, UserFiles

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
# Making room for an upload, a file younger than this is left: its upload has only just landed.
YOUNG_FILE_S = 60.0
CACHE_FULL = ("The server's space for uploads is full right now (app.upload_cache_bytes in mia.toml); "
              "try again in a minute.")
NO_LENGTH = "An upload must state its size (a Content-Length header); send it again from the app's page."


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
        self._lock = threading.Lock()  # a sweep, and letting an upload in, one at a time
        self._receiving = 0  # bytes of the uploads let in and not yet done

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
        with self._lock:
            return self._sweep(now=self._clock())

    def admit(self, size: int) -> bool:
        """Make room for an upload of `size` bytes and count it as being received (call `done`
        after): the sweep, with the oldest files over the bound going first, but none younger than
        YOUNG_FILE_S. False, and nothing counted, when there is no room even so."""
        with self._lock:
            now = self._clock()
            report = self._sweep(now=now, incoming=self._receiving + size, young_after=now - YOUNG_FILE_S)
            if report.kept_bytes + self._receiving + size > self.max_bytes:
                return False
            self._receiving += size
            return True

    def done(self, size: int) -> None:
        """An upload let in by `admit(size)` has landed (or failed)."""
        with self._lock:
            self._receiving -= size

    def _sweep(self, *, now: float, incoming: int = 0, young_after: float | None = None) -> SweepReport:
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
        while kept and kept_bytes + incoming > self.max_bytes:
            if young_after is not None and kept[0].modified > young_after:
                break
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


class BoundedUploads:
    """ASGI middleware: an upload to Gradio's cache is let in only when `cache` has room for it
    (UploadCache.admit), else answered 507 with a sentence; one that states no size, 411."""

    def __init__(self, app, cache: UploadCache) -> None:
        self.app = app
        self.cache = cache

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"].rstrip("/") != UPLOAD_ROUTE:
            return await self.app(scope, receive, send)
        size = _content_length(scope)
        if size is None:
            return await _refuse(send, 411, NO_LENGTH, close=True)
        if not await anyio.to_thread.run_sync(self.cache.admit, size):
            log.warning("upload of %d bytes refused: the upload cache %s is full", size, self.cache.root)
            await _drain(receive)  # so that the client, still sending, reads the answer
            return await _refuse(send, 507, CACHE_FULL)
        try:
            return await self.app(scope, receive, send)
        finally:
            self.cache.done(size)


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                size = int(value)
            except ValueError:
                return None
            return size if size >= 0 else None
    return None


async def _drain(receive) -> None:
    """Read a request's body to its end, keeping none of it."""
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body"):
            return


async def _refuse(send, status: int, sentence: str, *, close: bool = False) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8")] + ([(b"connection", b"close")] if close else [])
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": sentence.encode()})
