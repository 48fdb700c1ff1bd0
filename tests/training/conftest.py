"""Fixtures for the training tests: the tiny random model and the real wiki index, both cached once."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

# One thread: the tiny model's sampling is dominated by small ops that lose to thread contention.
torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[2]
TEST_CACHE = REPO / ".mia" / "test-cache"
CANARY = REPO / "data" / "ttrl" / "canary.jsonl"
# Questions with answers (HotpotQA train) that test-time learning's tests learn from.
QUESTIONS = [
    ("Which magazine was started first, Arthur's Magazine or First for Women?", "Arthur's Magazine"),
    ("Were Scott Derrickson and Ed Wood of the same nationality?", "yes"),
    ("What government position was held by the woman who portrayed Corliss Archer in Kiss and Tell?", "Chief of Protocol"),
]

# The verl recipe's tests (marked `verl`) import the recipe, and with it verl's OmegaConf, at module
# level; the app's environment (.venv, requirements.txt) has no verl, so there the module is not
# collected. `make test` runs them in .venv-train.
if importlib.util.find_spec("verl") is None:
    collect_ignore = ["test_verl_recipe.py"]


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    from backend.llm.tiny import build_tiny_random_model

    target = TEST_CACHE / "models" / "tiny-random"
    if not (target / "config.json").is_file():
        build_tiny_random_model(target)
    return target


@pytest.fixture(scope="session")
def wiki_tools():
    from backend.tools import build_tools

    return build_tools(cache_dir=TEST_CACHE / "index", web_enabled=False, progress=False)


@pytest.fixture(scope="session")
def search_schemas(wiki_tools) -> dict[str, dict]:
    return {name: tool.parameters for name, tool in wiki_tools.items()}


@pytest.fixture(scope="session")
def index_dir() -> Path:
    return TEST_CACHE / "index"
