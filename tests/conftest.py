"""Shared fixtures: the tiny random SmolLM2-tokenizer model (fast) and the real SmolLM2 (slow tests).

Heavy imports happen inside the fixtures so collecting unrelated tests stays fast.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Must be set before torch loads: OpenMP threads that spin while waiting make torch ~10x slower
# whenever other processes share the CPU cores (measured on the 2-core machine: 16 s -> 1.4 s).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

REPO_ROOT = Path(__file__).resolve().parents[1]


def slow_model_cache_dir() -> Path:
    """Where slow tests keep prepared models between runs: $MIA_TEST_CACHE or <repo>/.mia/test-cache."""
    return Path(os.environ.get("MIA_TEST_CACHE") or REPO_ROOT / ".mia" / "test-cache")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random Llama with the real SmolLM2 tokenizer, built once per session (seed 0)."""
    from backend.llm.tiny import build_tiny_random_model

    return build_tiny_random_model(tmp_path_factory.mktemp("tiny-llm") / "model", seed=0)


@pytest.fixture(scope="session")
def tiny_chat_model(tiny_model_dir: Path):
    """An EmbeddedChatModel on `tiny_model_dir`, shared by the session (thread-safe)."""
    from backend.llm.embedded import EmbeddedChatModel

    return EmbeddedChatModel(tiny_model_dir)


@pytest.fixture(scope="session")
def _smollm2_prepared() -> Path:
    from backend.llm.embedded import prepare_embedded_model

    return prepare_embedded_model(slow_model_cache_dir() / "models", progress=False)


@pytest.fixture
def smollm2_dir(request: pytest.FixtureRequest, _smollm2_prepared: Path) -> Path:
    """The real SmolLM2-135M-Instruct folder (prepared once into the test cache); slow tests only."""
    if request.node.get_closest_marker("slow") is None:
        pytest.fail("Tests that use the real SmolLM2 must be marked @pytest.mark.slow.")
    return _smollm2_prepared


@pytest.fixture
def smollm2_chat_model(smollm2_dir: Path):
    """The process-wide EmbeddedChatModel on the real SmolLM2 (loaded once, shared)."""
    from backend.llm.embedded import get_embedded_model

    return get_embedded_model(smollm2_dir)


@pytest.fixture(scope="session")
def _qwen_assembled() -> Path:
    from backend.llm.model_parts import assemble_qwen_gguf

    return assemble_qwen_gguf(slow_model_cache_dir() / "models", progress=False)


@pytest.fixture
def qwen_gguf(request: pytest.FixtureRequest, _qwen_assembled: Path) -> Path:
    """The default model's GGUF (Qwen2.5-Coder-1.5B-Instruct, assembled once into the test cache); slow tests only."""
    if request.node.get_closest_marker("slow") is None:
        pytest.fail("Tests that use the real Qwen model must be marked @pytest.mark.slow.")
    return _qwen_assembled


@pytest.fixture(scope="session")
def shared_tools():
    """The real tools on the real sandbox-wiki index (BM25), cached under <repo>/.mia/test-cache/index."""
    from backend.config import AgentConfig
    from backend.tools import build_tools

    return build_tools(cache_dir=REPO_ROOT / ".mia" / "test-cache" / "index", web_enabled=False, progress=False,
                       image_min_similarity=AgentConfig().caption_min_similarity)  # as the app builds them


@pytest.fixture(scope="session")
def embedder():
    """The process-wide MiniLM embedder."""
    from memory_db import get_embedder

    return get_embedder()


def worker_config_file(tmp_path: Path, model_dir: Path, index_dir: Path, **ttrl) -> Path:
    """A TOML configuration for an app and its learner worker in separate processes: every role on
    the tiny model, data under tmp_path/data (the wiki index linked from `index_dir`), learning fast."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "index").symlink_to(index_dir)  # the wiki index the other tests built, not a new one
    roles = "\n".join(f'[roles.{role}]\nbackend = "embedded"\nmodel_dir = "{model_dir}"\nmax_new_tokens = 16\n'
                      for role in ("planner", "executor", "manager", "judge"))
    extra = "\n".join(f"{key} = {json.dumps(value)}" for key, value in ttrl.items())
    path = tmp_path / "worker.toml"
    path.write_text(f'''
[paths]
data_dir = "{data}"
[agent]
max_turns = 1
reflections = 1
[search]
hybrid = false
web = false
[ttrl]
enabled = true
rollouts_per_signal = 2
signals_per_update = 1
rollouts_per_hour = 100
canary_size = 1
max_turns = 1
max_new_tokens = 16
poll_seconds = 0.2
lora_r = 4
lora_alpha = 8
lease_ttl_s = 5
{extra}
{roles}''', encoding="utf-8")
    return path


# -- PostgreSQL (MIA_TEST_POSTGRES_URL; `.ci/postgres.sh` starts one with pgvector) ---------------
POSTGRES_URL_VARIABLE = "MIA_TEST_POSTGRES_URL"


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
    import uuid

    from sqlalchemy import create_engine, text

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


