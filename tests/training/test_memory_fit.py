"""Test-time learning checks that the Planner's training fits in the free memory before loading it.

The kernel's tables are real files laid out as the kernel lays them out (proc/, sys/fs/cgroup/ under
a folder); the learner, the weights and the GGUF conversion are real, on the tiny model.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from backend.config import RoleConfig, load_config
from backend.manager import Manager
from training.ttrl import TestTimeLearner
from training.ttrl import memory_fit
from training.ttrl.live import learner_memory_need, planner_base_dir
from training.ttrl.memory_fit import (
    GB,
    MemoryNeed,
    NotEnoughMemory,
    free_memory_bytes,
    learner_need,
    oom_kill_count,
    require_memory,
)

from tests.training.conftest import CANARY
from tests.training.test_ttrl import settings


def kernel_tables(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


MEMINFO = "MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n"


def test_free_memory_is_what_the_kernel_calls_available_or_the_cgroups_room_when_less(tmp_path):
    alone = kernel_tables(tmp_path / "alone", {"proc/meminfo": MEMINFO, "proc/self/cgroup": "0::/\n"})
    assert free_memory_bytes(alone) == 20000000 * 1024
    # cgroup v2 with a limit: 8 GB, 6 GB used of which 1 GB is page cache the kernel can reclaim.
    v2 = kernel_tables(tmp_path / "v2", {
        "proc/meminfo": MEMINFO, "proc/self/cgroup": "0::/app.slice/mia\n",
        "sys/fs/cgroup/app.slice/mia/memory.events": "oom 0\noom_kill 0\n",
        "sys/fs/cgroup/app.slice/mia/memory.max": "8000000000\n",
        "sys/fs/cgroup/app.slice/mia/memory.current": "6000000000\n",
        "sys/fs/cgroup/app.slice/mia/memory.stat": "anon 5000000000\ninactive_file 1000000000\n",
    })
    assert free_memory_bytes(v2) == 3000000000
    (v2 / "sys/fs/cgroup/app.slice/mia/memory.max").write_text("max\n")
    assert free_memory_bytes(v2) == 20000000 * 1024
    # cgroup v1 inside a container: the cgroup's own folder is the mount itself.
    v1 = kernel_tables(tmp_path / "v1", {
        "proc/meminfo": MEMINFO, "proc/self/cgroup": "5:memory:/docker/abc\n1:cpu,cpuacct:/docker/abc\n0::/\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes": "4000000000\n",
        "sys/fs/cgroup/memory/memory.usage_in_bytes": "3500000000\n",
        "sys/fs/cgroup/memory/memory.stat": "cache 600000000\ntotal_inactive_file 500000000\n",
    })
    assert free_memory_bytes(v1) == 1000000000
    (v1 / "sys/fs/cgroup/memory/memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    assert free_memory_bytes(v1) == 20000000 * 1024


def test_out_of_memory_kills_are_counted_for_the_machine_and_the_cgroup(tmp_path):
    root = kernel_tables(tmp_path, {
        "proc/vmstat": "pgfault 123\noom_kill 3\n", "proc/self/cgroup": "0::/mia\n",
        "sys/fs/cgroup/mia/memory.events": "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n",
    })
    assert oom_kill_count(root) == 5
    (root / "sys/fs/cgroup/mia/memory.events").write_text("oom 3\noom_kill 3\n")
    assert oom_kill_count(root) == 6
    assert oom_kill_count(tmp_path / "no-kernel-here") == 0
    assert isinstance(oom_kill_count(), int)  # this machine's own tables read


def test_the_need_counts_the_weights_of_a_folder_and_their_dtype(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    weights = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).num_parameters()
    half, full = learner_need(tiny_model_dir, "bfloat16"), learner_need(tiny_model_dir, "float32")
    assert half.weights == full.weights == weights
    assert full.bytes - half.bytes == int(weights * 4 * memory_fit.PEAK_PER_WEIGHT_BYTE) - int(
        weights * 2 * memory_fit.PEAK_PER_WEIGHT_BYTE)
    with pytest.raises(ValueError, match="do not exist"):
        learner_need(tmp_path / "nowhere", "bfloat16")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no .safetensors"):
        learner_need(tmp_path / "empty", "bfloat16")


def test_a_need_beyond_the_free_memory_is_refused_with_both_numbers(tmp_path):
    root = kernel_tables(tmp_path, {"proc/meminfo": "MemAvailable:    5000000 kB\n", "proc/self/cgroup": "0::/\n"})
    need = MemoryNeed(weights=1_540_000_000, dtype="bfloat16", bytes=int(7.5 * GB))
    with pytest.raises(NotEnoughMemory) as refused:
        require_memory(need, root)
    assert str(refused.value) == ("Test-time learning needs about 7.5 GB (1.54 billion weights in bfloat16) free; "
                                  "5.1 GB is free. Close other programs, or set ttrl.enabled = false.")
    with pytest.raises(NotEnoughMemory, match='set ttrl.weights_dtype = "bfloat16"'):
        require_memory(replace(need, dtype="float32"), root)
    require_memory(replace(need, bytes=int(5 * GB)), root)  # fits: nothing raised


@pytest.fixture
def learner(tmp_path, tiny_model_dir, wiki_tools, embedder):
    from backend.llm.embedded import EmbeddedChatModel
    from memory_db import MemoryStore

    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    model = EmbeddedChatModel(tiny_model_dir)
    yield TestTimeLearner(settings(weights_dtype="bfloat16"), root=tmp_path / "ttrl", planner_base_dir=tiny_model_dir,
                          executor_model=model, judge_model=model, manager=Manager(model, store),
                          tools=wiki_tools, canary_path=CANARY)
    store.close()


def test_the_learner_loads_its_planner_only_when_training_it_fits(learner, monkeypatch):
    free = free_memory_bytes()
    monkeypatch.setattr(memory_fit, "WORKSPACE_BYTES", free + int(GB))  # this machine's real free memory falls short
    with pytest.raises(NotEnoughMemory, match=r"needs about .* GB .* free; .* GB is free"):
        learner.policy()
    assert learner._policy is None
    monkeypatch.undo()
    policy = learner.policy()
    base = [p for name, p in policy.model.named_parameters() if "lora_" not in name]
    assert {p.dtype for p in base} == {torch.bfloat16}  # ttrl.weights_dtype


def test_a_llamacpp_planner_is_dequantised_only_when_training_it_fits(tmp_path, monkeypatch):
    from tests.tiny_gguf import build_tiny_random_gguf

    gguf_path, source_model = build_tiny_random_gguf(tmp_path / "gguf" / "tiny-random.F32.gguf", seed=3)
    base = load_config(environ={})
    config = replace(base, data_dir=tmp_path / "data",
                     roles={**base.roles, "planner": RoleConfig(backend="llamacpp", model_file=str(gguf_path))})
    need = learner_memory_need(config)
    assert need == learner_need(gguf_path, "bfloat16") and need.weights == source_model.num_parameters()
    monkeypatch.setattr(memory_fit, "WORKSPACE_BYTES", free_memory_bytes() + int(GB))
    with pytest.raises(NotEnoughMemory):
        planner_base_dir(config)
    assert not config.model_cache_dir.exists()  # refused before minutes of dequantising
    monkeypatch.undo()
    assert planner_base_dir(config) == config.model_cache_dir / "tiny-random.F32.bfloat16"
