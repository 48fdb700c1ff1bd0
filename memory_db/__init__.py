"""The memory store of the MIA research assistant (the Manager's non-parametric memory).

Imports nothing else of the project. Start with MemoryStore(url).
"""
from .embedder import Embedder, get_embedder
from .errors import (
    CapacityError,
    HistoryNotFoundError,
    ImportFileError,
    InvalidMemoryError,
    MemoryNotFoundError,
    MemoryStoreError,
    UndoConflictError,
    UnreadableMemoryError,
)
from .learning_queue import QueueEntry, QueueItemError
from .lease import LeaseFence, LeaseHeld, LeaseLost, LeaseState, LearnerLease
from .records import (
    MODALITIES,
    QUESTION_TYPES,
    ContrastiveMemories,
    HistoryEntry,
    Memory,
    NewMemory,
    ScoredMemory,
    UnreadableMemory,
)
from .import_export import IMPORT_EXISTING, ImportOutcome
from .store import MemoryStore
from .struck import StrikeNotFoundError, StruckSource, memory_key
from .vector_index import IndexSettings

__all__ = [
    "CapacityError", "ContrastiveMemories", "Embedder", "HistoryEntry", "HistoryNotFoundError",
    "IMPORT_EXISTING", "ImportFileError", "LearnerLease", "LeaseFence", "LeaseHeld", "LeaseLost", "LeaseState", "ImportOutcome", "IndexSettings", "InvalidMemoryError", "MODALITIES", "Memory",
    "MemoryNotFoundError", "MemoryStore", "MemoryStoreError", "NewMemory", "QUESTION_TYPES", "QueueEntry", "QueueItemError",
    "ScoredMemory", "StrikeNotFoundError", "StruckSource", "UndoConflictError", "UnreadableMemory", "UnreadableMemoryError", "get_embedder", "memory_key",
]
