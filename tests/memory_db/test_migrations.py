"""Alembic migrations run on open and keep existing data."""
from datetime import datetime

import numpy as np
from sqlalchemy import insert, inspect

from memory_db import MemoryStore
from memory_db.database import current_revision, migrate, open_engine
from memory_db.schema import metadata

FIRST_REVISION = "0001_memories"


def test_upgrade_from_the_first_revision_keeps_data(database_url, embedder):
    engine = open_engine(database_url)
    migrate(engine, FIRST_REVISION)
    assert current_revision(engine) == FIRST_REVISION
    assert "memory_history" not in inspect(engine).get_table_names()
    vector = embedder.encode(["Who built the Great Wall?"])[0]
    with engine.begin() as conn:
        # `pinned` arrives in a later revision; the insert names only first-revision columns
        conn.execute(insert(metadata.tables["memories"]).values(
            id="3f1c2b7e-1111-4a2b-9c3d-000000000001", namespace="old", question="Who built the Great Wall?",
            caption=None, summary="Old summary kept across upgrades.", plan="p", correct=True,
            question_type="human", modality="text", usage_count=4, success_count=3, provenance={"v": 1},
            question_embedding=vector.astype(np.float32).tobytes(), caption_embedding=None,
            created_at=datetime(2025, 1, 2, 3, 4, 5), updated_at=datetime(2025, 1, 2, 3, 4, 5),
        ))
    engine.dispose()

    store = MemoryStore(database_url, embedder=embedder)  # upgrades to head
    try:
        assert current_revision(store._engine) != FIRST_REVISION
        memory = store.get("3f1c2b7e-1111-4a2b-9c3d-000000000001", namespace="old")
        assert (memory.summary, memory.usage_count, memory.success_count, memory.pinned) == (
            "Old summary kept across upgrades.", 4, 3, False)
        assert memory.created_at.isoformat() == "2025-01-02T03:04:05+00:00"
        hit = store.search_contrastive("Who constructed the Great Wall of China?", namespace="old").successful[0]
        assert hit.memory.id == memory.id
        store.pin(memory.id, namespace="old")
        assert store.history(memory.id, namespace="old")[0].action == "pin"
    finally:
        store.close()


def test_opening_twice_is_a_no_op(database_url, embedder):
    MemoryStore(database_url, embedder=embedder).close()
    store = MemoryStore(database_url, embedder=embedder)
    try:
        assert store.count(namespace="x") == 0
    finally:
        store.close()


OPEN_AT = """
import sys, time
from memory_db import MemoryStore
start_at = float(sys.argv[2])
while time.time() < start_at:
    time.sleep(0.001)
MemoryStore(sys.argv[1]).close()
"""


def test_processes_opening_a_fresh_database_together_migrate_it_once(database_url):
    """App processes started together on an empty database (a new deployment) all come up."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    start_at = time.time() + 5.0
    processes = [subprocess.Popen([sys.executable, "-c", OPEN_AT, database_url, str(start_at)], cwd=repo,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
    errors = [p.communicate(timeout=120)[1] for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0, 0], errors
