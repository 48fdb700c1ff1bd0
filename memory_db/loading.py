"""Building a namespace's vector index from the database, and adding bulk-inserted rows to it."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, func, select

from .approximate import faiss_available, training_size_for
from .embedder import EMBEDDING_DIM
from .records import MODALITIES, Memory
from .rows import vectors_from_bytes, vectors_problem
from .schema import memories
from .vector_index import QUESTION_TYPE_CODES, BucketIndex, IndexSettings, NamespaceIndex
from .versions import read_version

LOAD_CHUNK_ROWS = 20_000


def load_namespace(engine: Engine, namespace: str, settings: IndexSettings) -> tuple[NamespaceIndex, int]:
    """A namespace's index built from the database, and the version it reflects."""
    index = NamespaceIndex(EMBEDDING_DIM, settings)
    with engine.connect() as conn:
        # read before the rows: a write landing during the load shows as a newer version
        version = read_version(conn, namespace)
        sizes = dict(conn.execute(
            select(memories.c.modality, func.count()).where(memories.c.namespace == namespace)
            .group_by(memories.c.modality)
        ).all())
        for modality, size in sizes.items():
            if modality not in MODALITIES:  # unreadable rows (MemoryStore.unreadable reports them)
                continue
            _load_bucket(conn, index.bucket(modality), namespace, modality, size, settings)
    return index, version


def _load_bucket(conn: Connection, bucket: BucketIndex, namespace: str, modality: str, size: int,
                 settings: IndexSettings) -> None:
    """Stream a bucket in, chunk by chunk. A big bucket goes straight into the inverted file
    (trained on the first chunks), so its vectors are never held twice."""
    query = (select(memories.c.row_id, memories.c.question_embedding, memories.c.caption_embedding,
                    memories.c.correct, memories.c.usage_count, memories.c.success_count,
                    memories.c.question_type)
             .where(memories.c.namespace == namespace, memories.c.modality == modality)
             .order_by(memories.c.row_id))
    approximate = size > settings.approximate_threshold and faiss_available()
    needed_for_training = training_size_for(size) if approximate else 0
    pending: list[tuple] = []
    result = conn.execution_options(yield_per=LOAD_CHUNK_ROWS).execute(query)
    for chunk in result.partitions():
        pending.append(_columns_of(_indexable(chunk, modality), bucket.with_captions))
        if bucket.ann is None and approximate:
            if sum(len(part[0]) for part in pending) < needed_for_training:
                continue
            bucket.start_approximate(size, np.concatenate([part[1] for part in pending]))
        for part in pending:
            bucket.add_many(*part)
        pending = []
    if pending and bucket.ann is None and approximate:
        bucket.start_approximate(size, np.concatenate([part[1] for part in pending]))
    for part in pending:
        bucket.add_many(*part)


def _indexable(rows: Iterable[Any], modality: str) -> list[Any]:
    """The rows the index can hold; the others are unreadable and reported by MemoryStore.unreadable."""
    return [r for r in rows if r.question_type in QUESTION_TYPE_CODES and vectors_problem(
        modality, len(r.question_embedding), None if r.caption_embedding is None else len(r.caption_embedding)) is None]


def _columns_of(chunk: Iterable[Any], with_captions: bool) -> tuple:
    rows = list(chunk)
    captions = None
    if with_captions:
        zero = bytes(4 * EMBEDDING_DIM)
        captions = vectors_from_bytes([r.caption_embedding or zero for r in rows])
    return (
        np.fromiter((r.row_id for r in rows), np.int64, len(rows)),
        vectors_from_bytes([r.question_embedding for r in rows]),
        captions,
        np.fromiter((bool(r.correct) for r in rows), bool, len(rows)),
        np.fromiter((r.usage_count for r in rows), np.int64, len(rows)),
        np.fromiter((r.success_count for r in rows), np.int64, len(rows)),
        np.fromiter((QUESTION_TYPE_CODES[r.question_type] for r in rows), np.int8, len(rows)),
    )


def index_new_rows(index: NamespaceIndex, stored: list[Memory], row_ids: list[int],
                vectors: list[tuple[np.ndarray, np.ndarray | None]]) -> None:
    for modality in {m.modality for m in stored}:
        chosen = [i for i, m in enumerate(stored) if m.modality == modality]
        chosen.sort(key=lambda i: row_ids[i])
        bucket = index.bucket(modality)
        captions = None
        if bucket.with_captions:
            captions = np.stack([vectors[i][1] if vectors[i][1] is not None else np.zeros(EMBEDDING_DIM, np.float32)
                                 for i in chosen])
        bucket.add_many(
            np.array([row_ids[i] for i in chosen], np.int64),
            np.stack([vectors[i][0] for i in chosen]), captions,
            np.array([stored[i].correct for i in chosen]),
            np.array([stored[i].usage_count for i in chosen], np.int64),
            np.array([stored[i].success_count for i in chosen], np.int64),
            np.array([QUESTION_TYPE_CODES[stored[i].question_type] for i in chosen], np.int8),
        )
