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


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped afterwards."""
    base = _postgres_url_or_skip()
    schema = f"test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in base else "?"
    yield f"{base}{separator}options=-csearch_path%3D{schema}"
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memory.db'}"
    return request.getfixturevalue("postgres_url")


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
