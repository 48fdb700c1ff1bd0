"""The stable key of a retrieved passage, by which a source a person struck as wrong is left out of
their namespace's searches (memory_db.struck keeps the keys; WikiSearchTool, WebSearchTool and
VisitTool filter by them).

A wiki article is its source and title (every paragraph of it is struck); a web page its source,
title and address; a passage of the person's documents its locator (collection, file, page or
section) and a digest of its text, the passage's id: re-indexing the same file keeps it.

A web page is struck by its address, whichever tool returned it: a result of `web_search` struck as
wrong is not read by `visit` either, and a page read by `visit` and struck is not a search result
again (StruckPages).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping
from urllib.parse import urlsplit, urlunsplit

from backend.tools.base import Passage

MAX_KEY_CHARS = 1000  # memory_db.struck's limit
DOCUMENT_SCHEME = "doc://"
WEB_SOURCES = ("web", "page")  # the sources of web_search's results and of the pages visit reads
_ADDRESS_START = re.compile(r"\|(?=https?://)", re.IGNORECASE)


def passage_id(text: str) -> str:
    """A passage's id within its page: a digest of its text, whitespace-insensitive."""
    return hashlib.sha256(" ".join((text or "").split()).encode("utf-8")).hexdigest()[:12]


def passage_key(passage: Passage | Mapping) -> str:
    """The key a strike of `passage` (a Passage, or a run event's passage or citation dict) is kept under."""
    get = passage.get if isinstance(passage, Mapping) else lambda name, default=None: getattr(passage, name, default)
    title, source, url = str(get("title") or ""), str(get("source") or ""), get("url")
    if url and str(url).startswith(DOCUMENT_SCHEME):
        key = f"{url}|{passage_id(str(get('text') or ''))}"
    elif url:
        key = f"{source}|{title}|{url}"
    else:
        key = f"{source}|{title}"
    if len(key) > MAX_KEY_CHARS:
        key = f"{source[:100]}|sha256:{hashlib.sha256(key.encode('utf-8')).hexdigest()}"
    return key


def page_address(url: str) -> str:
    """`url` as one page: without its #fragment, scheme and host in lower case, "/" for no path."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.strip()
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query, ""))


class StruckPages:
    """The web pages struck in one namespace, from its struck keys: by address (a web key is
    "<source>|<title>|<url>", and a title may hold "|" itself, so every "|http(s)://" tail counts),
    and by whole key for an address too long to stand in its key (digested, see passage_key)."""

    def __init__(self, keys: Collection[str]) -> None:
        self.keys = frozenset(key for key in keys if key.partition("|")[0] in WEB_SOURCES)
        self.addresses = frozenset(page_address(key[tail.end():]) for key in self.keys
                                   for tail in _ADDRESS_START.finditer(key))

    def __len__(self) -> int:
        return len(self.keys)

    def holds(self, url: str | None, passage: Passage | None = None) -> bool:
        """`url` (or the passage read from it) was struck in this namespace."""
        return (bool(url) and page_address(url) in self.addresses) or (
            passage is not None and passage_key(passage) in self.keys)
