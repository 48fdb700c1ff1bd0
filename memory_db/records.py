"""Plain-data records the store takes and returns (detached from the database)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

QUESTION_TYPES = (
    "location", "human", "time", "career", "process",
    "definition", "event", "function", "property", "others",
)
MODALITIES = ("text", "text+image")
MAX_SUMMARY_WORDS = 300


def modality_for(caption: str | None) -> str:
    return "text+image" if caption else "text"


@dataclass
class NewMemory:
    """What the Manager hands to MemoryStore.add after a finished trajectory."""

    question: str
    summary: str
    plan: str
    correct: bool
    namespace: str = "default"
    caption: str | None = None
    question_type: str = "others"
    provenance: dict = field(default_factory=dict)  # memory_db.provenance.Provenance.to_dict(); read with read_provenance


@dataclass
class Memory:
    """A stored memory."""

    id: str
    namespace: str
    question: str
    caption: str | None
    summary: str
    plan: str
    correct: bool
    question_type: str
    modality: str
    usage_count: int
    success_count: int
    win_rate: float
    pinned: bool
    provenance: dict  # as stored: read it with memory_db.provenance.read_provenance
    created_at: datetime
    updated_at: datetime

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        data["updated_at"] = self.updated_at.isoformat()
        return data


@dataclass
class ScoredMemory:
    memory: Memory
    similarity: float
    score: float


@dataclass
class ContrastiveMemories:
    successful: list[ScoredMemory]
    failed: list[ScoredMemory]


@dataclass
class HistoryEntry:
    """One recorded change of a memory; `before`/`after` are Memory.to_json_dict() or None."""

    id: int
    memory_id: str
    namespace: str
    action: str
    before: dict | None
    after: dict | None
    actor: str
    created_at: datetime


@dataclass
class UnreadableMemory:
    """A stored row that cannot be read as a memory, and why; MemoryStore.delete removes it."""

    memory_id: str
    reason: str
