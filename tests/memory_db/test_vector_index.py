"""The in-process vector index: exact by default, an inverted file (FAISS) above a size."""
import uuid
from datetime import datetime

import numpy as np
import pytest
from sqlalchemy import insert

from memory_db import IndexSettings, MemoryStore
from memory_db.database import migrate, open_engine
from memory_db.records import QUESTION_TYPES
from memory_db.schema import memories
from memory_db.vector_index import BucketIndex

DIM = 384


def clustered_unit_vectors(count: int, clusters: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, DIM))
    vectors = centres[rng.integers(0, clusters, count)] + 0.6 * rng.standard_normal((count, DIM))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def filled_bucket(vectors, settings, seed=1) -> BucketIndex:
    rng = np.random.default_rng(seed)
    bucket = BucketIndex(DIM, with_captions=False, settings=settings)
    n = len(vectors)
    usage = rng.integers(1, 6, n)
    bucket.add_many(np.arange(1, n + 1, dtype=np.int64), vectors, None, rng.random(n) < 0.6, usage,
                    rng.integers(0, usage + 1), rng.integers(0, 3, n).astype(np.int8))
    return bucket


def ids(ranked):
    return [r.row_id for r in ranked]


def test_approximate_index_recall_against_exact():
    vectors = clustered_unit_vectors(6000, 60, seed=0)
    exact = filled_bucket(vectors, IndexSettings(approximate_threshold=10**9))
    approximate = filled_bucket(vectors, IndexSettings(approximate_threshold=1000))
    assert exact.ann is None and approximate.ann is not None and approximate.questions is None
    queries = clustered_unit_vectors(60, 60, seed=0)[:60] * 0.9 + vectors[:60] * 0.1
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    found = total = 0
    for query in queries:
        for want, got in zip(exact.search(query, None, k=4, offset=0, question_type=None),
                             approximate.search(query, None, k=4, offset=0, question_type=None)):
            found += len(set(ids(want)) & set(ids(got)))
            total += len(want)
    assert found / total >= 0.9


def test_index_follows_updates_and_removals_in_both_modes():
    vectors = clustered_unit_vectors(1500, 20, seed=3)
    for threshold in (10**9, 500):
        bucket = filled_bucket(vectors, IndexSettings(approximate_threshold=threshold))
        target = vectors[10]  # stored as row 11
        assert bucket.nearest(target, None)[0] == 11
        top_row = 11
        bucket.remove(top_row)
        after = bucket.search(target, None, k=50, offset=0, question_type=None)
        assert top_row not in ids(after[0]) + ids(after[1])
        bucket.set_vectors(500, target, None)
        nearest_row, similarity = bucket.nearest(target, None)
        assert nearest_row == 500 and similarity == pytest.approx(1.0, abs=1e-5)
        bucket.update(500, correct=False, usage=1, success=1)  # best similarity and win rate
        assert bucket.search(target, None, k=1, offset=0, question_type=None)[1][0].row_id == 500


def test_store_loads_a_large_namespace_into_the_approximate_index(tmp_path):
    url = f"sqlite:///{tmp_path / 'big.db'}"
    engine = open_engine(url)
    migrate(engine)
    vectors = clustered_unit_vectors(3000, 30, seed=5)
    now = datetime(2025, 5, 1)
    rows = [dict(id=str(uuid.UUID(int=i + 1)), namespace="big", question=f"synthetic question {i}", caption=None,
                 summary="s", plan="p", correct=i % 3 != 0, question_type=QUESTION_TYPES[i % 2], modality="text",
                 usage_count=1 + i % 4, success_count=i % 2, provenance={}, question_embedding=v.tobytes(),
                 caption_embedding=None, created_at=now, updated_at=now) for i, v in enumerate(vectors)]
    with engine.begin() as conn:
        conn.execute(insert(memories), rows)
    engine.dispose()
    exact = MemoryStore(url, index_settings=IndexSettings(approximate_threshold=10**9))
    approximate = MemoryStore(url, index_settings=IndexSettings(approximate_threshold=1000))
    try:
        found = total = 0
        for query in vectors[::100]:
            want = exact.search_contrastive_vectors(query, namespace="big", k=4, question_type="location")
            got = approximate.search_contrastive_vectors(query, namespace="big", k=4, question_type="location")
            assert all(s.memory.question_type == "location" for s in got.successful + got.failed)
            for w, g in ((want.successful, got.successful), (want.failed, got.failed)):
                found += len({s.memory.id for s in w} & {s.memory.id for s in g})
                total += len(w)
        assert approximate._indexes["big"].buckets["text"].ann is not None
        assert found / total >= 0.9
    finally:
        exact.close()
        approximate.close()


def test_store_keeps_the_approximate_index_in_step_with_writes(tmp_path, embedder):
    store = MemoryStore(f"sqlite:///{tmp_path / 'm.db'}", embedder=embedder, merge_threshold=None,
                        index_settings=IndexSettings(approximate_threshold=20))
    try:
        from memory_db import NewMemory

        topics = ["volcano", "violin", "glacier", "senate", "enzyme", "comet", "pyramid", "tango", "sonnet",
                  "reef", "monsoon", "quasar", "saffron", "falcon", "canal", "opera", "lichen", "satellite",
                  "marathon", "origami", "tundra", "geyser", "cathedral", "abacus", "harbor"]
        stored = [store.add(NewMemory(f"What is special about the {t}?", f"Read the wiki page on {t}.", "p", True))
                  for t in topics]
        assert store._indexes["default"].buckets["text"].ann is not None
        target = stored[topics.index("pyramid")]
        assert store.search_contrastive("Why is the pyramid special?", k=1).successful[0].memory.id == target.id
        store.relabel(target.id, namespace="default", correct=False)
        assert store.search_contrastive("Why is the pyramid special?", k=1).failed[0].memory.id == target.id
        store.delete(target.id, namespace="default")
        result = store.search_contrastive("Why is the pyramid special?", k=30)
        assert target.id not in {s.memory.id for s in result.successful + result.failed}
        assert len(result.successful) == len(topics) - 1
    finally:
        store.close()
