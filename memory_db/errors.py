"""Exceptions raised by the memory store; each message tells the user what to do."""


class MemoryStoreError(Exception):
    """Base class for every error the memory store raises."""


class MemoryNotFoundError(MemoryStoreError, KeyError):
    """No memory with this id exists in the given namespace."""

    def __init__(self, memory_id: str, namespace: str):
        self.memory_id = memory_id
        self.namespace = namespace
        super().__init__(
            f"No memory with id {memory_id!r} in namespace {namespace!r}; "
            "check the id and the namespace (list() shows what is stored)."
        )

    def __str__(self) -> str:  # KeyError would otherwise print the repr of the message
        return self.args[0]


class HistoryNotFoundError(MemoryStoreError, KeyError):
    """No history entry with this id exists in the given namespace."""

    def __init__(self, history_id: int, namespace: str):
        super().__init__(
            f"No history entry {history_id} in namespace {namespace!r}; "
            "history(namespace=...) lists the recorded changes."
        )

    def __str__(self) -> str:
        return self.args[0]


class InvalidMemoryError(MemoryStoreError, ValueError):
    """A field of a memory (or of a request) has a value the store cannot accept."""


class UnreadableMemoryError(InvalidMemoryError):
    """A stored row holds values no memory may have (written before every write was validated)."""

    def __init__(self, memory_id: str, namespace: str, reason: str):
        self.memory_id = memory_id
        self.namespace = namespace
        self.reason = reason
        super().__init__(
            f"Memory {memory_id!r:.60} in namespace {namespace!r:.60} cannot be read ({reason}); delete it "
            "(Delete in the Memory view, or MemoryStore.delete) and add it again if it is still needed."
        )


class ImportFileError(MemoryStoreError, ValueError):
    """A JSONL file given to import_jsonl is malformed; nothing was imported."""

    def __init__(self, line_number: int, reason: str):
        self.line_number = line_number
        self.reason = reason
        super().__init__(
            f"Import rejected at line {line_number}: {reason}. Nothing was imported; "
            "fix that line (or re-export the file) and try again."
        )


class CapacityError(MemoryStoreError):
    """A namespace is at capacity and nothing in it may be evicted (all pinned)."""


class UndoConflictError(MemoryStoreError):
    """The memory changed after the history entry being undone; undo the later changes first."""
