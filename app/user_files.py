"""Files served to one user only: the exports the app writes for a user and the files a user uploads.

Gradio serves any file of its cache to anyone signed in who has the URL. With logins on, the app
records whose each such file is, and `OwnFilesOnly` (ASGI middleware) answers 404 to anyone else.
Files the app writes for a user live under a folder of their own in Gradio's cache (so Gradio serves
them where they are); a file there that no one owns (from an earlier run of the app) is no one's.
"""

from __future__ import annotations

import json
import secrets
import threading
from http.cookies import SimpleCookie
from pathlib import Path

from gradio.utils import get_upload_folder

FILE_ROUTES = ("/gradio_api/file=", "/gradio_api/file/")
UPLOAD_ROUTE = "/gradio_api/upload"
MAX_UPLOAD_ANSWER_BYTES = 1_000_000


def _key(path: str | Path) -> str:
    return str(Path(path).resolve())


class UserFiles:
    """Who may download which served file."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root or Path(get_upload_folder()) / "mia-user-files").resolve()
        self._owners: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def new_folder(self, user: str) -> Path:
        """An empty folder, under a name nobody can guess, for files written for `user`."""
        folder = self.root / secrets.token_hex(16)
        folder.mkdir(parents=True, mode=0o700)
        return folder

    def grant(self, path: str | Path, user: str) -> None:
        with self._lock:
            self._owners.setdefault(_key(path), set()).add(user)

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
    """ASGI middleware: a user's files go to that user alone; an upload becomes the uploader's."""

    def __init__(self, app, files: UserFiles) -> None:
        self.app = app
        self.files = files

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        wanted = requested_file(scope["path"])
        if wanted is not None and not self.files.may_read(wanted, signed_in_user(scope)):
            return await _not_found(send)
        if scope["path"].rstrip("/") == UPLOAD_ROUTE and scope["method"] == "POST":
            return await self._upload(scope, receive, send)
        return await self.app(scope, receive, send)

    async def _upload(self, scope, receive, send):
        """Pass the upload through; the paths it answers with become the uploader's before the
        answer leaves (so no one else can fetch them even at once)."""
        user = signed_in_user(scope)
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
                    self.files.grant(path, user)
            released = True
            for waiting in held:
                await send(waiting)

        await self.app(scope, receive, hold)


async def _not_found(send) -> None:
    await send({"type": "http.response.start", "status": 404,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
    await send({"type": "http.response.body", "body": b"Not found."})
