"""Fixtures for the memory store tests: one real embedder per session, a fresh real database
per test (SQLite file; PostgreSQL too when MIA_TEST_POSTGRES_URL is set)."""
from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import create_engine, text

from memory_db import Embedder, MemoryStore, get_embedder

POSTGRES_URL_VARIABLE = "MIA_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return get_embedder()


def _postgres_url_or_skip() -> str:
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not url:
        pytest.skip(f"{POSTGRES_URL_VARIABLE} is not set; run `eval \"$(bash .ci/postgres.sh)\"` "
                    "to start a local PostgreSQL for these tests")
    return url


def _fresh_schema(*, with_public: bool) -> Iterator[str]:
    """A PostgreSQL URL whose search_path starts with a fresh schema, dropped afterwards; with
    `public` after it (where .ci/postgres.sh creates the pgvector extension), or alone."""
    base = _postgres_url_or_skip()
    schema = f"test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in base else "?"
    search_path = f"{schema}%2Cpublic" if with_public else schema
    yield f"{base}{separator}options=-csearch_path%3D{search_path}"
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """PostgreSQL as the store finds it where pgvector is installed: search in SQL."""
    yield from _fresh_schema(with_public=True)


@pytest.fixture
def postgres_without_pgvector_url() -> Iterator[str]:
    """PostgreSQL where the store cannot reach pgvector's type (it is not on the search_path):
    embeddings as bytes and search in process, as before pgvector."""
    yield from _fresh_schema(with_public=False)


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
