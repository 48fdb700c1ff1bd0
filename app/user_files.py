"""Files served to one user only: the exports the app writes for a user and the files a user uploads.

Gradio serves any file of its cache to anyone signed in who has the URL. The app records whose each
such file is, and `OwnFilesOnly` (ASGI middleware) answers 404 to anyone else. Files the app writes
for a user live under a folder of their own in Gradio's cache (so Gradio serves them where they
are); a file there that no one owns (from an earlier run of the app) is no one's. Such a file is
recorded as downloaded once its user has fetched it whole, and the upload cache's sweep
(app/upload_cache.py) deletes it a short while later, and whatever else is old. An upload is recorded
as its uploader's, so that a view reading an uploaded file reads only one its own caller uploaded,
never a path a request names.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from http.cookies import SimpleCookie
from pathlib import Path

from gradio.utils import get_upload_folder

log = logging.getLogger(__name__)

FILE_ROUTES = ("/gradio_api/file=", "/gradio_api/file/")
UPLOAD_ROUTE = "/gradio_api/upload"
MAX_UPLOAD_ANSWER_BYTES = 1_000_000


def _key(path: str | Path) -> str:
    return str(Path(path).resolve())


class UserFiles:
    """Who may download which served file, and who uploaded which."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root or Path(get_upload_folder()) / "mia-user-files").resolve()
        self._owners: dict[str, set[str]] = {}
        self._uploads: set[str] = set()
        self._downloaded: dict[str, float] = {}  # a file written for a user -> when they first had all of it
        self._lock = threading.Lock()

    def new_folder(self, user: str) -> Path:
        """An empty folder, under a name nobody can guess, for files written for `user`."""
        folder = self.root / secrets.token_hex(16)
        folder.mkdir(parents=True, mode=0o700)
        return folder

    def grant(self, path: str | Path, user: str) -> None:
        with self._lock:
            self._owners.setdefault(_key(path), set()).add(user)

    def record_upload(self, path: str | Path, user: str) -> None:
        """`path` came in through the upload route in a request of `user`'s."""
        with self._lock:
            self._owners.setdefault(_key(path), set()).add(user)
            self._uploads.add(_key(path))

    def is_upload_of(self, path: str | Path, user: str) -> bool:
        """Whether `user` uploaded `path` (and it has not been discarded since)."""
        key = _key(path)
        with self._lock:
            return key in self._uploads and user in self._owners.get(key, set())

    def is_written_file(self, path: str | Path) -> bool:
        """Whether `path` is a file the app wrote for a user (an export, a report, a source's copy)."""
        key = _key(path)
        with self._lock:
            return key in self._owners and Path(key).is_relative_to(self.root)

    def mark_downloaded(self, path: str | Path, when: float) -> None:
        with self._lock:
            self._downloaded.setdefault(_key(path), when)

    def downloaded_before(self, moment: float) -> set[Path]:
        """The files written for users that were downloaded whole before `moment` (seconds since the epoch)."""
        with self._lock:
            return {Path(key) for key, when in self._downloaded.items() if when < moment}

    def forget(self, path: str | Path) -> None:
        """Drop the records of a file that is gone."""
        key = _key(path)
        with self._lock:
            self._owners.pop(key, None)
            self._uploads.discard(key)
            self._downloaded.pop(key, None)

    def discard(self, path: str | Path) -> None:
        """Delete a file its user is done with (a rejected or consumed upload, a downloaded export)."""
        try:
            Path(path).unlink(missing_ok=True)
        except OSError as exc:  # the cache's sweep deletes it later
            log.warning("could not delete %s: %s", path, exc)
        self.forget(path)

    def may_read(self, path: str | Path, user: str | None) -> bool:
        key = _key(path)
        with self._lock:
            owners = self._owners.get(key)
        if owners is None:  # not a user's file (Gradio's own, an example) unless it lies in our folder
            return not Path(key).is_relative_to(self.root)
        return user in owners


def _cookies(scope: dict) -> dict[str, str]:
    jar = SimpleCookie()
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed Cookie header: no session
                return {}
    return {name: morsel.value for name, morsel in jar.items()}


def signed_in_user(scope: dict) -> str | None:
    """The user a request's Gradio session cookie belongs to (as Gradio's own login check reads it)."""
    app = scope.get("app")
    tokens, cookie_id = getattr(app, "tokens", None), getattr(app, "cookie_id", None)
    if not tokens or cookie_id is None:
        return None
    cookies = _cookies(scope)
    token = cookies.get(f"access-token-{cookie_id}") or cookies.get(f"access-token-unsecure-{cookie_id}")
    return tokens.get(token) if token else None


def requested_file(path: str) -> str | None:
    """The file a request path asks Gradio for, or None for any other route."""
    for route in FILE_ROUTES:
        if path.startswith(route):
            wanted = path[len(route):]  # already percent-decoded, as Gradio reads it
            return wanted if wanted.startswith("/") else str(Path.cwd() / wanted)
    return None


class OwnFilesOnly:
    """ASGI middleware: a user's files go to that user alone; an upload becomes the uploader's; a
    file the app wrote for a user is recorded as downloaded once they have had all of it.
    `local_user`: the one user of an app without logins (None: the signed-in user of each request)."""

    def __init__(self, app, files: UserFiles, local_user: str | None = None) -> None:
        self.app = app
        self.files = files
        self.local_user = local_user

    def _user(self, scope: dict) -> str | None:
        return self.local_user if self.local_user is not None else signed_in_user(scope)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        wanted = requested_file(scope["path"])
        if wanted is not None:
            if not self.files.may_read(wanted, self._user(scope)):
                return await _not_found(send)
            if scope["method"] == "GET" and self.files.is_written_file(wanted):
                return await self._download(wanted, scope, receive, send)
        if scope["path"].rstrip("/") == UPLOAD_ROUTE and scope["method"] == "POST":
            return await self._upload(scope, receive, send)
        return await self.app(scope, receive, send)

    async def _download(self, path: str, scope, receive, send):
        """Serve a file written for its user; all of it read out (200, not a range), it is downloaded."""
        status = 0

        async def watch(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            if message["type"] == "http.response.body" and not message.get("more_body") and status == 200:
                self.files.mark_downloaded(path, time.time())
            await send(message)

        await self.app(scope, receive, watch)

    async def _upload(self, scope, receive, send):
        """Pass the upload through; the paths it answers with become the uploader's before the
        answer leaves (so no one else can fetch them even at once)."""
        user = self._user(scope)
        held: list[dict] = []
        body = bytearray()
        released = False

        async def hold(message):
            nonlocal released
            if released:
                return await send(message)
            held.append(message)
            if message["type"] != "http.response.body":
                return
            body.extend(message.get("body", b""))
            if message.get("more_body") and len(body) <= MAX_UPLOAD_ANSWER_BYTES:
                return
            try:
                paths = json.loads(bytes(body))
            except ValueError:
                paths = []
            for path in paths if user and isinstance(paths, list) else []:
                if isinstance(path, str):
                    self.files.record_upload(path, user)
            released = True
            for waiting in held:
                await send(waiting)

        await self.app(scope, receive, hold)


async def _not_found(send) -> None:
    await send({"type": "http.response.start", "status": 404,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
    await send({"type": "http.response.body", "body": b"Not found."})
