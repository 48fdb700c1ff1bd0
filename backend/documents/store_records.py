"""What the document store (backend.documents.store) keeps of each file and reports: its limits,
a file's manifest row read back as a FileInfo (a damaged value left at its default and named in the
file's warnings, so that the file is still listed and can be removed), a collection, and what an
add did."""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field

from backend.documents.naming import SHARED
from backend.documents.parsing import ParsedFile


@dataclass(frozen=True)
class DocumentLimits:
    max_file_bytes: int = 50_000_000
    max_namespace_bytes: int = 2_000_000_000  # all of a namespace's files together (the shared scope's too)


@dataclass
class FileInfo:
    collection: str
    shared: bool
    name: str
    sha256: str
    bytes: int
    format: str
    added: float
    indexed: float
    passages: int
    pages: int = 0
    ocr_pages: int = 0
    unread_pages: list[int] = field(default_factory=list)  # image-only pages not read (OCR off, or nothing read)
    ocr_on: bool = False
    warnings: list[str] = field(default_factory=list)

    def row(self) -> dict:
        row = asdict(self)
        del row["collection"], row["shared"], row["name"]
        return row


@dataclass
class CollectionInfo:
    name: str
    shared: bool
    files: list[FileInfo]
    problem: str = ""  # its manifest cannot be read: what is wrong and what to do (then `files` is empty)

    @property
    def label(self) -> str:
        return f"{SHARED}/{self.name}" if self.shared else self.name


@dataclass
class AddReport:
    collection: str
    shared: bool
    added: list[FileInfo] = field(default_factory=list)  # parsed and embedded now
    reused: list[FileInfo] = field(default_factory=list)  # bytes already indexed in this scope: nothing re-embedded
    unchanged: list[str] = field(default_factory=list)  # the same name with the same bytes was already there
    failed: list[tuple[str, str]] = field(default_factory=list)  # (name, why)
    skipped: list[str] = field(default_factory=list)  # files of other types found in a folder

    @property
    def indexed(self) -> list[FileInfo]:
        return self.added + self.reused

    def lines(self) -> list[str]:
        where = f"{SHARED}/{self.collection}" if self.shared else self.collection
        lines = [f"{info.name}: {info.passages} passage{'' if info.passages == 1 else 's'}" + _pages_note(info) + (" (already indexed: reused)" if info in self.reused else "")
                 for info in self.indexed]
        lines += [f"{name}: unchanged (already in {where})" for name in self.unchanged]
        lines += [f"FAILED {name}: {why}" for name, why in self.failed]
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)} files of other types: {', '.join(self.skipped[:10])}"
                         + (" …" if len(self.skipped) > 10 else ""))
        return lines


def _pages_note(info: FileInfo) -> str:
    parts = []
    if info.pages:
        parts.append(f"{info.pages} pages")
    if info.ocr_pages:
        parts.append(f"{info.ocr_pages} read by OCR")
    if info.unread_pages:
        why = "OCR is off" if not info.ocr_on else "OCR read nothing"
        parts.append(f"{len(info.unread_pages)} image-only pages not read ({why})")
    return f" ({', '.join(parts)})" if parts else ""


META_KEYS = ("format", "indexed", "pages", "ocr_pages", "unread_pages", "ocr_on", "warnings")  # and "passages"


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _texts(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


_ROW_CHECKS = {  # what each value of a manifest row must be
    "sha256": lambda value: isinstance(value, str) and _SHA256.fullmatch(value) is not None,
    "bytes": _whole, "passages": _whole, "pages": _whole, "ocr_pages": _whole,
    "format": lambda value: isinstance(value, str),
    "added": lambda value: _whole(value) or isinstance(value, float),
    "indexed": lambda value: _whole(value) or isinstance(value, float),
    "unread_pages": lambda value: isinstance(value, list) and all(map(_whole, value)),
    "ocr_on": lambda value: isinstance(value, bool),
    "warnings": _texts,
}


def file_info(collection: str, shared: bool, name: str, row) -> FileInfo:
    """A manifest row as a FileInfo. A value of the wrong kind (a damaged row) is left at its default
    and named in the warnings, so that the file is still listed and can be removed."""
    row = row if isinstance(row, dict) else {}
    known = {key: value for key, value in row.items() if key in _ROW_CHECKS and _ROW_CHECKS[key](value)}
    damaged = sorted(key for key in _ROW_CHECKS if key not in known and (key in row or key == "sha256"))
    info = FileInfo(collection=collection, shared=shared, name=name, **{
        "sha256": "", "bytes": 0, "format": "", "added": 0.0, "indexed": 0.0, "passages": 0, **known})
    if damaged:
        advice = "remove it and add the file again" if "sha256" in damaged else "re-index or remove it"
        info.warnings = [*info.warnings, f"its record is damaged ({', '.join(damaged)}): {advice}"]
    return info


def row_sha(row) -> str:
    """A manifest row's content hash, '' when it has none (a damaged row)."""
    sha = row.get("sha256") if isinstance(row, dict) else None
    return sha if _ROW_CHECKS["sha256"](sha) else ""


def parsed_meta(parsed: ParsedFile, passages: int) -> dict:
    return {"format": parsed.format, "indexed": time.time(), "passages": passages, "pages": parsed.pages,
            "ocr_pages": parsed.ocr_pages, "unread_pages": parsed.unread_pages, "ocr_on": parsed.ocr_on,
            "warnings": parsed.warnings}


def amount(count: int) -> str:
    return f"{count / 1e6:,.1f} MB" if count >= 100_000 else f"{count:,} bytes"
