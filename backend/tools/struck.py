"""The stable key of a retrieved passage, by which a source a person struck as wrong is left out of
their namespace's searches (memory_db.struck keeps the keys; WikiSearchTool filters by them).

A wiki article is its source and title (every paragraph of it is struck); a web page its source,
title and address; a passage of the person's documents its locator (collection, file, page or
section) and a digest of its text, the passage's id: re-indexing the same file keeps it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from backend.tools.base import Passage

MAX_KEY_CHARS = 1000  # memory_db.struck's limit
DOCUMENT_SCHEME = "doc://"


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
