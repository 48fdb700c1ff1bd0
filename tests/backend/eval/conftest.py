"""Fixtures for the evaluation harness: a real agent on the tiny random model, evaluations run once.

The tiny model (tests/conftest.py) exercises real generation in every role; the sandbox-wiki
index is the real one, cached under <repo>/.mia/test-cache/index so it is built only once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.config import Config, load_config
from backend.eval.spec import EvalSpec

REPO_ROOT = Path(__file__).resolve().parents[3]
DEV = REPO_ROOT / "data" / "hotpotqa" / "dev.jsonl"
TRAIN = REPO_ROOT / "data" / "hotpotqa" / "train.jsonl"
SHARED_INDEX_CACHE = REPO_ROOT / ".mia" / "test-cache" / "index"
SMOKE_QUESTIONS = 3


@pytest.fixture(scope="session")
def eval_config_file(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TOML file: every role on the tiny model (short outputs), 2 executor turns, 1 reflection,
    data in tmp, the shared index. No relevance floor: the few questions here are unrelated, and the
    tests check that warm-up memories reach later questions (the floor has tests of its own)."""
    root = tmp_path_factory.mktemp("eval-config")
    data_dir = root / "data"
    data_dir.mkdir()
    SHARED_INDEX_CACHE.mkdir(parents=True, exist_ok=True)
    (data_dir / "index").symlink_to(SHARED_INDEX_CACHE, target_is_directory=True)
    roles = "\n".join(
        f'[roles.{role}]\nbackend = "embedded"\nmodel_dir = "{tiny_model_dir}"\nmax_new_tokens = 16\n'
        for role in ("planner", "executor", "manager", "judge")
    )
    toml = root / "eval.toml"
    toml.write_text(
        f'[paths]\ndata_dir = "{data_dir}"\n\n[agent]\nmax_turns = 2\nreflections = 1\nmax_seconds = 120\n'
        "min_memory_similarity = -1\n\n"
        f"[search]\nweb = false\nhybrid = false\n\n{roles}",
        encoding="utf-8",
    )
    return toml


@pytest.fixture(scope="session")
def eval_config(eval_config_file: Path) -> Config:
    return load_config(eval_config_file, environ={})


@pytest.fixture(scope="session")
def run_eval(eval_config: Config):
    """Run one evaluation through the real runtime; returns the outcome."""
    from backend.eval.runner import evaluate, open_eval_runtime

    def run(spec: EvalSpec):
        runtime = open_eval_runtime(eval_config, spec.out_dir, progress=False, planner_version=spec.planner_version)
        try:
            return evaluate(spec, runtime, progress=False)
        finally:
            runtime.close()

    return run


@pytest.fixture(scope="session")
def smoke_results(run_eval, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, object]]:
    """A 3-question evaluation of every method, run once per test session: method -> (folder, outcome)."""
    from backend.methods import METHOD_NAMES as METHODS

    root = tmp_path_factory.mktemp("eval-smoke")
    results = {}
    for method in METHODS:
        spec = EvalSpec(data=DEV, method=method, out_dir=root / method, limit=SMOKE_QUESTIONS)
        results[method] = (spec.out_dir, run_eval(spec))
    return results
