"""Names that come from outside (a form, a file name, a folder on disk) turned into safe ones, and the
`doc://` locators of passages.

Nothing the user types or uploads picks a path: a collection name is one folder-safe word, a file
name is a relative path of cleaned components (no `..`, no absolute path, no hidden or control
characters), and a namespace is mapped to a folder name it cannot escape.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import quote, unquote

from backend.documents.errors import DocumentError

SHARED = "shared"  # the reserved collection scope visible to every namespace (added by admins)
MAX_COLLECTION_CHARS = 64
MAX_COMPONENT_CHARS = 120
MAX_FILE_DEPTH = 8
LOCATOR_SCHEME = "doc://"

_COLLECTION_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_COMPONENT_UNSAFE = re.compile(r"[^\w .,()+&@'=-]+")
_SAFE_NAMESPACE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")


def _refuse_traversal(raw: str, what: str) -> None:
    if "\x00" in raw:
        raise DocumentError(f"{what} {raw!r} contains a NUL character.")
    parts = re.split(r"[\\/]+", raw)
    if any(part in ("..", ".") for part in parts):
        raise DocumentError(f"{what} {raw!r} climbs out of its folder ('..'); give a plain name.")


def collection_name(raw: str | None) -> str:
    """A collection name: letters, digits, '.', '_' and '-'; spaces and others become '-'."""
    raw = (raw or "").strip()
    _refuse_traversal(raw, "The collection name")
    if "/" in raw or "\\" in raw:
        raise DocumentError(f"The collection name {raw!r} holds a path separator; give one word, e.g. 'papers'.")
    plain = "".join(ch for ch in unicodedata.normalize("NFKD", raw) if not unicodedata.combining(ch))
    name = _COLLECTION_UNSAFE.sub("-", plain).strip("-._")[:MAX_COLLECTION_CHARS]
    if not name:
        raise DocumentError("Give the collection a name (letters, digits, '-', '_' or '.').")
    if name.casefold() == SHARED:
        raise DocumentError(f"'{SHARED}' is reserved (it marks the collections every user sees); choose another name.")
    return name


def _component(raw: str) -> str:
    text = "".join(ch for ch in unicodedata.normalize("NFC", raw) if unicodedata.category(ch)[0] != "C")
    text = _COMPONENT_UNSAFE.sub("_", text).strip(" ._")
    if len(text) > MAX_COMPONENT_CHARS:  # keep the extension, which says the format
        stem, dot, suffix = text.rpartition(".")
        text = (stem[: MAX_COMPONENT_CHARS - len(suffix) - 1] + dot + suffix) if dot and len(suffix) <= 8 else text[:MAX_COMPONENT_CHARS]
    return text


def file_name(raw: str | None) -> str:
    """A file's name inside its collection: a relative path ('notes/a.md'), each part cleaned."""
    raw = (raw or "").strip()
    _refuse_traversal(raw, "The file name")
    if raw.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", raw):
        raise DocumentError(f"The file name {raw!r} is an absolute path; give a name relative to its folder.")
    parts = [_component(part) for part in re.split(r"[\\/]+", raw) if part]
    parts = [part for part in parts if part]
    if not parts:
        raise DocumentError(f"The file name {raw!r} has no usable characters.")
    if len(parts) > MAX_FILE_DEPTH:
        raise DocumentError(f"The file name {raw!r} is nested more than {MAX_FILE_DEPTH} folders deep.")
    return "/".join(parts)


def namespace_folder(namespace: str) -> str:
    """The folder of a namespace's documents; a name that is not folder-safe is hashed."""
    if not isinstance(namespace, str) or not namespace:
        raise DocumentError("A namespace is needed to store documents.")
    if _SAFE_NAMESPACE.fullmatch(namespace):
        return f"ns-{namespace}"
    return "nsx-" + hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class Locator:
    """Where a passage comes from: `doc://<collection>/<file>#page=3` (or `#section=<heading>`);
    a shared collection's passages read `doc://shared/<collection>/<file>...`."""

    collection: str
    file: str
    shared: bool = False
    page: int | None = None
    section: str | None = None

    def __str__(self) -> str:
        scope = f"{SHARED}/" if self.shared else ""
        path = "/".join(quote(part, safe="") for part in self.file.split("/"))
        fragment = ""
        if self.page is not None:
            fragment = f"#page={self.page}"
        elif self.section:
            fragment = "#section=" + quote(self.section, safe="")
        return f"{LOCATOR_SCHEME}{scope}{quote(self.collection, safe='')}/{path}{fragment}"

    @classmethod
    def parse(cls, text: str) -> Locator:
        text = (text or "").strip()
        if not text.startswith(LOCATOR_SCHEME):
            raise DocumentError(f"{text[:80]!r} is not a document locator (doc://<collection>/<file>).")
        body, _, fragment = text[len(LOCATOR_SCHEME):].partition("#")
        parts = [unquote(part) for part in body.split("/")]
        shared = len(parts) > 2 and parts[0] == SHARED
        if shared:
            parts = parts[1:]
        if len(parts) < 2:
            raise DocumentError(f"{text[:80]!r} names no file (doc://<collection>/<file>).")
        page = section = None
        key, _, value = fragment.partition("=")
        if key == "page" and value.isdigit():
            page = int(value)
        elif key == "section" and value:
            section = unquote(value)
        return cls(collection=collection_name(parts[0]), file=file_name("/".join(parts[1:])), shared=shared,
                   page=page, section=section)
