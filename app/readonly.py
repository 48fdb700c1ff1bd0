"""The read-only demo's view of the memory store: retrieval works, nothing is written.

A run in the read-only demo still consolidates its trajectory (so the page shows the summary it
would store), but the memory is not saved and usage counters do not move.
"""

from __future__ import annotations

import uuid

from memory_db import Memory, MemoryStore, NewMemory
from memory_db.records import modality_for
from memory_db.rows import utc_now


class ReadOnlyStore:
    READS = ("search_contrastive", "search_contrastive_vectors", "get", "list", "count", "namespaces",
             "history", "export_jsonl", "embedder")

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def __getattr__(self, name: str):
        if name in self.READS:
            return getattr(self._store, name)
        raise PermissionError("This is a read-only demo: memories can be seen and used, but not changed.")

    def add(self, new: NewMemory, *, actor: str = "manager", keep_contrast: bool = False) -> Memory:
        now = utc_now()
        return Memory(
            id="unsaved-" + uuid.uuid4().hex[:8], namespace=new.namespace, question=new.question,
            caption=new.caption, summary=new.summary, plan=new.plan, correct=new.correct,
            question_type=new.question_type, modality=modality_for(new.caption), usage_count=0,
            success_count=0, win_rate=0.0, pinned=False, provenance=dict(new.provenance),
            created_at=now, updated_at=now,
        )

    def record_outcome(self, *args, **kwargs) -> None:
        return None
