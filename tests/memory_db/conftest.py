"""Fixtures for the memory store tests: one real embedder per session, a fresh real database
per test (SQLite file; PostgreSQL too when MIA_TEST_POSTGRES_URL is set)."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from memory_db import Embedder, MemoryStore, get_embedder



@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return get_embedder()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
                        pytest.param("postgres-without-pgvector", marks=pytest.mark.postgres)])
def database_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memory.db'}"
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return request.getfixturevalue("postgres_without_pgvector_url")


@pytest.fixture
def open_store(database_url, embedder) -> Iterator[Callable[..., MemoryStore]]:
    """Opens stores on this test's database (same URL each call); closes them at the end."""
    opened: list[MemoryStore] = []

    def factory(**options) -> MemoryStore:
        store = MemoryStore(database_url, embedder=embedder, **options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store) -> MemoryStore:
    return open_store()
