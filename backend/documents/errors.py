"""The one exception of the documents package: its message is the sentence shown to the user."""

from __future__ import annotations


class DocumentError(ValueError):
    """A document cannot be added, found or read; the message says which and what to do."""


class ParseError(DocumentError):
    """A file's contents cannot be read as its format."""
