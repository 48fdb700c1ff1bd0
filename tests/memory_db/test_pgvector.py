"""PostgreSQL with pgvector: vectors in vector(384) columns, search in SQL through the HNSW index,
ranked as the in-process index ranks. Needs MIA_TEST_POSTGRES_URL on a server with pgvector
(.ci/postgres.sh starts one)."""
from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine, event, insert, text

from memory_db import IndexSettings, MemoryStore, NewMemory
from memory_db.pgvector import HNSW_INDEX
from memory_db.records import QUESTION_TYPES
from memory_db.schema import memories

from tests.conftest import _fresh_schema

pytestmark = pytest.mark.postgres

DIM = 384
BUCKET_SIZE = 3000
EXACT = IndexSettings(database_search=False, approximate_threshold=10**9)


class VectorsByText:
    """An embedder that hands out given vectors (and a fixed random one for any other text)."""

    dim = DIM

    def __init__(self, vectors: dict[str, np.ndarray] | None = None):
        self.vectors = dict(vectors or {})

    def encode(self, texts: list[str]) -> np.ndarray:
        out = []
        for text_ in texts:
            if text_ not in self.vectors:
                rng = np.random.default_rng(int.from_bytes(hashlib.sha256(text_.encode()).digest()[:8], "little"))
                vector = rng.standard_normal(DIM).astype(np.float32)
                self.vectors[text_] = vector / np.linalg.norm(vector)
            out.append(self.vectors[text_])
        return np.stack(out).astype(np.float32)


def clustered_unit_vectors(count: int, clusters: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, DIM))
    vectors = centres[rng.integers(0, clusters, count)] + 0.6 * rng.standard_normal((count, DIM))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def import_lines(questions: list[str], seed: int, captions: list[str] | None = None) -> str:
    rng = np.random.default_rng(seed)
    lines = []
    for i, question in enumerate(questions):
        usage = int(rng.integers(1, 11))
        record = {"type": "memory", "id": str(uuid.UUID(int=seed * 10**6 + i + 1)), "question": question,
                  "summary": "Searched the wiki, then cross-checked.", "plan": "1. search",
                  "correct": bool(rng.random() < 0.6), "usage_count": usage,
                  "success_count": int(rng.integers(0, usage + 1)),
                  "question_type": QUESTION_TYPES[int(rng.integers(0, 3))]}
        if captions:
            record["caption"] = captions[i]
        lines.append(json.dumps(record))
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def big_bucket() -> Iterator[tuple[str, VectorsByText, np.ndarray]]:
    """BUCKET_SIZE memories written through the store (an import) into one bucket."""
    url = next(schema := _fresh_schema(with_public=True))
    vectors = clustered_unit_vectors(BUCKET_SIZE, 60, seed=0)
    questions = [f"synthetic question {i}" for i in range(BUCKET_SIZE)]
    embedder = VectorsByText(dict(zip(questions, vectors)))
    store = MemoryStore(url, embedder=embedder)
    assert store.import_jsonl("big", io.StringIO(import_lines(questions, seed=1))) == BUCKET_SIZE
    store.close()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("ANALYZE memories"))
    engine.dispose()
    yield url, embedder, vectors
    next(schema, None)


def queries_near(vectors: np.ndarray, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picks = vectors[rng.integers(0, len(vectors), count)] + 0.05 * rng.standard_normal((count, DIM))
    return (picks / np.linalg.norm(picks, axis=1, keepdims=True)).astype(np.float32)


def ids(found) -> list[str]:
    return [s.memory.id for s in found]


def test_the_store_keeps_vector_columns_and_searches_through_the_hnsw_index(big_bucket):
    url, embedder, vectors = big_bucket
    store = MemoryStore(url, embedder=embedder)
    engine = create_engine(url)
    try:
        assert store._database_search is not None
        with engine.connect() as conn:
            types = dict(conn.execute(text(
                "SELECT column_name, udt_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = 'memories'")).all())
            assert types["question_vector"] == types["caption_vector"] == "vector"
            assert types["question_embedding"] == "bytea"  # kept: an in-process index loads from it
            definition = conn.execute(text("SELECT indexdef FROM pg_indexes WHERE indexname = :name "
                                           "AND schemaname = current_schema()"), {"name": HNSW_INDEX}).scalar_one()
            assert "USING hnsw (question_vector vector_ip_ops)" in definition
            assert conn.execute(text("SELECT count(*) FROM memories WHERE question_vector IS NULL")).scalar_one() == 0

        statements: list[tuple[str, dict]] = []

        def capture(_conn, _cursor, statement, parameters, _context, _many):
            if "<#>" in statement and "ORDER BY" in statement:
                statements.append((statement, parameters))

        event.listen(store._engine, "before_cursor_execute", capture)
        found = store.search_contrastive_vectors(vectors[7], namespace="big", k=2)
        event.remove(store._engine, "before_cursor_execute", capture)
        assert found.successful and found.failed
        assert statements, "the search sent no nearest-neighbour query to the database"
        statement, parameters = statements[0]
        with engine.connect() as conn:
            plan = "\n".join(conn.exec_driver_sql("EXPLAIN " + statement, parameters).scalars())
        assert f"Index Scan using {HNSW_INDEX}" in plan, plan
        assert store._indexes == {}  # nothing loaded into the process
    finally:
        store.close()
        engine.dispose()


def test_recall_at_4_against_exact_search(big_bucket):
    url, embedder, vectors = big_bucket
    database = MemoryStore(url, embedder=embedder)
    exact = MemoryStore(url, embedder=embedder, index_settings=EXACT)  # in process, every vector compared
    try:
        found = total = 0
        for query in queries_near(vectors, 60, seed=2):
            want = exact.search_contrastive_vectors(query, namespace="big", k=4)
            got = database.search_contrastive_vectors(query, namespace="big", k=4)
            for w, g in ((want.successful, got.successful), (want.failed, got.failed)):
                found += len(set(ids(w)) & set(ids(g)))
                total += len(w)
        assert total == 60 * 8
        assert found / total >= 0.95
        assert database._indexes == {}
    finally:
        database.close()
        exact.close()


@pytest.mark.parametrize("options", [
    {"question_type": "time"},
    {"min_similarity": 0.5},
    {"k": 3, "offset": 2},
    {"similarity_weight": 0.2, "win_rate_weight": 0.8},
])
def test_filters_floor_paging_and_weights_rank_as_in_process(big_bucket, options):
    url, embedder, vectors = big_bucket
    database = MemoryStore(url, embedder=embedder)
    exact = MemoryStore(url, embedder=embedder, index_settings=EXACT)
    try:
        found = total = 0
        for query in queries_near(vectors, 20, seed=3):
            want = exact.search_contrastive_vectors(query, namespace="big", **{"k": 4, **options})
            got = database.search_contrastive_vectors(query, namespace="big", **{"k": 4, **options})
            for w, g in ((want.successful, got.successful), (want.failed, got.failed)):
                if "question_type" in options:
                    assert all(s.memory.question_type == options["question_type"] for s in g)
                if "min_similarity" in options:
                    assert all(s.similarity >= options["min_similarity"] for s in g)
                assert len(g) == len(w)
                found += len(set(ids(w)) & set(ids(g)))
                total += len(w)
        assert total and found / total >= 0.9
    finally:
        database.close()
        exact.close()


def test_a_small_bucket_is_scored_exactly_as_in_process(postgres_url):
    """Below the index's candidate count the bucket is scored whole in SQL: the same memories,
    order and scores as the in-process exact index, captions included."""
    vectors = clustered_unit_vectors(400, 8, seed=4)
    questions = [f"small question {i}" for i in range(200)]
    captions = [f"caption {i}" for i in range(200)]
    embedder = VectorsByText({**dict(zip(questions, vectors[:200])), **dict(zip(captions, vectors[200:]))})
    database = MemoryStore(postgres_url, embedder=embedder)
    database.import_jsonl("small", io.StringIO(import_lines(questions[:120], seed=5)))
    database.import_jsonl("small", io.StringIO(import_lines(questions[120:], seed=6, captions=captions[120:])))
    exact = MemoryStore(postgres_url, embedder=embedder, index_settings=EXACT)
    try:
        for i, query in enumerate(queries_near(vectors[:200], 12, seed=7)):
            caption = vectors[200 + i] if i % 2 else None
            for options in ({}, {"question_type": "human"}, {"min_similarity": 0.3}, {"offset": 1, "k": 3}):
                search = {"namespace": "small", "k": 4, "modality": "text+image" if i % 2 else "text", **options}
                want = exact.search_contrastive_vectors(query, caption, **search)
                got = database.search_contrastive_vectors(query, caption, **search)
                for w, g in ((want.successful, got.successful), (want.failed, got.failed)):
                    assert ids(g) == ids(w)
                    assert [s.score for s in g] == pytest.approx([s.score for s in w], abs=1e-5)
                    assert [s.similarity for s in g] == pytest.approx([s.similarity for s in w], abs=1e-5)
    finally:
        database.close()
        exact.close()


def test_rows_written_past_the_store_get_their_vectors_on_the_next_open(postgres_url, embedder):
    store = MemoryStore(postgres_url, embedder=embedder)
    store.close()
    vector = embedder.encode(["Who wrote The Magic Mountain?"])[0]
    engine = create_engine(postgres_url)
    with engine.begin() as conn:  # the bytes only, as an older version or a script would write it
        conn.execute(insert(memories).values(
            id=str(uuid.uuid4()), namespace="past", question="Who wrote The Magic Mountain?", caption=None,
            summary="Searched the wiki: Thomas Mann.", plan="p", correct=True, question_type="human",
            modality="text", usage_count=1, success_count=1, pinned=False, provenance={},
            question_embedding=vector.tobytes(), caption_embedding=None,
            created_at=datetime(2025, 1, 1), updated_at=datetime(2025, 1, 1)))
    engine.dispose()
    reopened = MemoryStore(postgres_url, embedder=embedder)
    try:
        hit = reopened.search_contrastive("Who is the author of The Magic Mountain?", namespace="past").successful
        assert [s.memory.question for s in hit] == ["Who wrote The Magic Mountain?"]
    finally:
        reopened.close()


def test_without_pgvector_the_store_says_so_and_searches_in_process(postgres_without_pgvector_url, embedder,
                                                                    caplog):
    with caplog.at_level(logging.WARNING, logger="memory_db.store"):
        store = MemoryStore(postgres_without_pgvector_url, embedder=embedder)
    try:
        assert store._database_search is None
        assert any("without pgvector" in record.getMessage() and "search_path" in record.getMessage()
                   for record in caplog.records)
        memory = store.add(NewMemory("Who painted The Night Watch?", "Searched: Rembrandt.", "p", True))
        assert store.search_contrastive("Who painted The Night Watch?").successful[0].memory.id == memory.id
        assert "default" in store._indexes  # the old way: the namespace loaded into the process
    finally:
        store.close()


def test_pgvector_arriving_later_is_taken_up_on_open(embedder):
    """A database first opened where pgvector was out of reach gets its vector columns, filled
    from the stored bytes, the first time a store opens it with pgvector in reach."""
    schema = _fresh_schema(with_public=False)
    url = next(schema)
    try:
        before = MemoryStore(url, embedder=embedder)
        memory = before.add(NewMemory("What is the capital of Mongolia?", "Searched: Ulaanbaatar.", "p", True))
        before.close()
        after = MemoryStore(url + "%2Cpublic", embedder=embedder)  # the same schema, public after it
        try:
            assert after._database_search is not None
            hit = after.search_contrastive("Which city is Mongolia's capital?").successful
            assert ids(hit) == [memory.id] and after._indexes == {}
        finally:
            after.close()
    finally:
        next(schema, None)


def test_the_pgvector_server_command_starts_a_server_the_store_searches_in(tmp_path, embedder):
    """`python -m memory_db.pgvector_server DIR` (the README's command; .ci/postgres.sh runs it):
    a PostgreSQL 16 with pgvector from the pgserver wheel, and the URL of a database on it."""
    repo = Path(__file__).resolve().parents[2]
    data = tmp_path / "pg"
    command = [sys.executable, "-m", "memory_db.pgvector_server", str(data)]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    started = subprocess.run(command + ["--detach", "--user", "mia", "--export", "URL"], capture_output=True,
                             text=True, cwd=repo, env=env, timeout=120)
    try:
        assert started.returncode == 0, started.stderr
        assert "pgvector 0.6.2 ready" in started.stderr
        [line] = started.stdout.splitlines()
        url = line.removeprefix("export URL=")
        store = MemoryStore(url, embedder=embedder)
        try:
            assert store._database_search is not None and store._database_search.support.version == "0.6.2"
            memory = store.add(NewMemory("Who discovered penicillin?", "Searched: Alexander Fleming.", "p", True))
            assert ids(store.search_contrastive("Who found penicillin?").successful) == [memory.id]
        finally:
            store.close()
    finally:
        stopped = subprocess.run(command + ["--stop"], capture_output=True, text=True, cwd=repo, env=env, timeout=60)
    assert stopped.returncode == 0 and "stopped" in stopped.stderr
