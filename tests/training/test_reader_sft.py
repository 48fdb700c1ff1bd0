"""The reader's fine-tuning on the tiny random model: what is trained, that a run lowers the loss,
that a killed run resumes from its last checkpoint, and that the adapter serves the Executor alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from backend.config import Config, ConfigError, RoleConfig, validate_role
from backend.llm.base import LLMError, ModelTraits
from backend.llm.embedded import EMBEDDED_TRAITS
from backend.llm.reader_adapter import check_base, read_reader_adapter, write_manifest
from tests.tiny_gguf import build_tiny_random_gguf
from tests.waiting import wait_until
from training.reader_data import reading_examples, write_rows
from training.sft_config import SFTSettings, load_sft_settings
from training.sft_trainer import IGNORE, tokenize_example, train_reader, validation_scores

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "data" / "hotpotqa" / "train.jsonl"
QWEN_TRAITS = ModelTraits(small=False, guided_turns=True, context_tokens=4096, executor_turns=4)


def example_rows(n: int, traits: ModelTraits = EMBEDDED_TRAITS) -> list[dict]:
    rows = []
    for line in TRAIN.read_text(encoding="utf-8").splitlines():
        rows += [dict(e.to_row(), split="train") for e in reading_examples(json.loads(line), traits)]
        if len(rows) >= n:
            return rows[:n]
    raise AssertionError("too few examples")


@pytest.fixture
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_only_the_readers_own_text_and_its_turn_end_are_trained(tokenizer):
    row = example_rows(1, QWEN_TRAITS)[0]
    example = tokenize_example(tokenizer, row)
    trained = [t for t, label in zip(example.input_ids, example.labels) if label != IGNORE]
    expected = "".join(s["text"] + (tokenizer.eos_token if s.get("end") else "") for s in row["segments"] if s["train"])
    assert tokenizer.decode(trained) == expected
    untrained = tokenizer.decode([t for t, label in zip(example.input_ids, example.labels) if label == IGNORE])
    assert untrained.endswith("Sentence:\nAnswer:") and "Copy the sentence" in untrained


def settings_for(tmp_path: Path, data: Path, **changes) -> SFTSettings:
    base = load_sft_settings(REPO / "training" / "configs" / "reader_tiny_cpu.yaml")
    return replace(base, data=str(data), output_dir=str(tmp_path / "run"), cache_dir=str(tmp_path / "cache"), **changes)


def examples_also_held_out(tmp_path: Path, rows: list[dict]) -> Path:
    """`rows` written as training examples and again as validation ones."""
    data = tmp_path / "examples.jsonl"
    write_rows(rows + [dict(r, split="validation") for r in rows], data)
    return data


def test_training_lowers_the_loss_on_its_examples_and_writes_a_manifest(tmp_path, tokenizer):
    rows = example_rows(4)
    settings = settings_for(tmp_path, examples_also_held_out(tmp_path, rows), epochs=6.0, learning_rate=5e-3,
                            gradient_accumulation=2, save_steps=100, validation_examples=4)
    output = train_reader(settings, command="test", progress=False)
    log = [json.loads(line) for line in (output / "log.jsonl").read_text().splitlines()]
    steps = [line for line in log if line["event"] == "step"]
    assert len(steps) == 12 and all(line["peak_rss_gb"] > 0 for line in steps)
    assert sum(s["loss"] for s in steps[-3:]) < sum(s["loss"] for s in steps[:3])
    adapter = read_reader_adapter(output)
    assert adapter.manifest["data_sha256"] and adapter.manifest["steps"] == 12
    assert adapter.manifest["examples_by_source"] == {"supporting-facts": 4}
    assert (output / "adapter" / "adapter_model.safetensors").is_file()

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    examples = [tokenize_example(tokenizer, r) for r in rows]
    base = AutoModelForCausalLM.from_pretrained(settings.cache_path / "models" / "tiny-random")
    before = validation_scores(base, examples)["validation_loss"]
    trained = PeftModel.from_pretrained(base, str(output / "adapter"))
    assert validation_scores(trained, examples)["validation_loss"] < before - 0.5


def test_the_base_and_a_checkpoint_are_scored_as_the_trainer_scores_them(tmp_path):
    from training.reader_data import ReaderDataError
    from training.sft_trainer import validate_reader

    settings = settings_for(tmp_path, examples_also_held_out(tmp_path, example_rows(4)), epochs=4.0,
                            learning_rate=5e-3, gradient_accumulation=2, save_steps=4, validation_examples=4)
    output = train_reader(settings, command="test", progress=False)
    logged = next(json.loads(line) for line in (output / "log.jsonl").read_text().splitlines()
                  if '"event": "validation"' in line and json.loads(line)["step"] == 4)
    checkpoint = validate_reader(settings, output / "checkpoints" / "checkpoint-4")
    assert checkpoint["validation_loss"] == pytest.approx(logged["validation_loss"], rel=1e-4)
    assert checkpoint["validation_examples"] == 4
    base = validate_reader(settings)
    final = validate_reader(settings, output / "adapter")
    assert base["adapter"] is None and final["validation_loss"] < base["validation_loss"] - 0.5
    with pytest.raises(ReaderDataError, match="no LoRA adapter"):
        validate_reader(settings, output)


@pytest.mark.timeout(600)  # two runs of the trainer in their own processes, each loading torch and the model
def test_a_killed_run_resumes_from_its_last_checkpoint(tmp_path):
    data = tmp_path / "examples.jsonl"
    write_rows(example_rows(12), data)
    config = tmp_path / "reader.yaml"
    config.write_text((REPO / "training/configs/reader_tiny_cpu.yaml").read_text()
                      .replace(".mia/reader/examples-tiny.jsonl", str(data))
                      .replace(".mia/reader/run-tiny", str(tmp_path / "run"))
                      .replace(".mia/test-cache", str(tmp_path / "cache"))
                      .replace("save_steps: 2", "save_steps: 1").replace("epochs: 1", "epochs: 2"))
    command = [sys.executable, "-m", "training", "reader", "--config", str(config)]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    first = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoints = tmp_path / "run" / "checkpoints"
    try:
        wait_until(lambda: (checkpoints / "checkpoint-3" / "trainer_state.json").is_file(), 300, "the third checkpoint")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert not (tmp_path / "run" / "manifest.json").exists()  # it did not finish
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    resumed = next(line for line in log if line["event"] == "resume")
    resumed_from = int(resumed["checkpoint"].split("-")[1])
    assert resumed_from >= 3
    after = [line["step"] for line in log[log.index(resumed):] if line["event"] == "step"]
    assert after[0] == resumed_from + 1 and after[-1] == 12  # 12 examples / 2 a step, 2 epochs
    assert read_reader_adapter(tmp_path / "run").manifest["steps"] == 12


def logits_for(model, text: str) -> np.ndarray:
    ids = model.prompt_ids([{"role": "user", "content": text}])
    slot = model._pool.acquire(ids)
    try:
        return model._feed(slot, ids).copy()
    finally:
        model._pool.release(slot)


@pytest.fixture(scope="module")
def trained_on_tiny_gguf(tmp_path_factory):
    """A reader adapter trained (two steps) on the tiny random model, written as a GGUF base."""
    root = tmp_path_factory.mktemp("reader-gguf")
    gguf, _ = build_tiny_random_gguf(root / "tiny.gguf")
    data = root / "examples.jsonl"
    write_rows(example_rows(4), data)
    settings = replace(settings_for(root, data, epochs=1.0, learning_rate=5e-2, save_steps=100, validation_examples=0),
                       model=str(gguf))
    return gguf, train_reader(settings, command="test", progress=False)


def test_the_adapter_serves_the_executor_alone_on_one_loaded_model(trained_on_tiny_gguf, tmp_path):
    from backend.llm.llamacpp import get_llamacpp_model
    from backend.llm.registry import backend_spec

    gguf, run = trained_on_tiny_gguf
    assert (run / "adapter.gguf").is_file()
    config = Config(data_dir=tmp_path / ".mia")
    bare = RoleConfig(backend="llamacpp", model_file=str(gguf), slots=1, context_tokens=512)
    build = backend_spec("llamacpp").build
    planner = build(config, bare, False)
    executor = build(config, replace(bare, adapter=str(run)), False)
    assert executor.adapter_path == run / "adapter.gguf" and "+reader:" in executor.name
    assert executor._model is planner._model  # one copy of the weights
    question = "Which river flows through Paris?"
    moved = logits_for(executor, question)
    kept = logits_for(planner, question)
    assert not np.allclose(moved, kept, atol=1e-4)
    fresh = get_llamacpp_model(gguf, slots=1, context_tokens=512)
    assert np.allclose(kept, logits_for(fresh, question), atol=1e-5)


def test_an_adapter_for_other_weights_is_refused_with_a_sentence(trained_on_tiny_gguf, tmp_path):
    gguf, run = trained_on_tiny_gguf
    other, _ = build_tiny_random_gguf(tmp_path / "other.gguf", seed=1)
    adapter = read_reader_adapter(run)
    check_base(adapter, gguf)
    with pytest.raises(LLMError, match="was trained on a model with sha256 .* set roles.executor.adapter"):
        check_base(adapter, other)
    broken = tmp_path / "broken"
    broken.mkdir()
    with pytest.raises(LLMError, match="has no manifest.json"):
        read_reader_adapter(broken)
    write_manifest(broken, base_model_sha256="0" * 64, format=99)
    with pytest.raises(LLMError, match="newer version"):
        read_reader_adapter(broken)


def test_only_the_executor_takes_an_adapter():
    validate_role("roles.executor", RoleConfig(adapter="models/reader"))
    with pytest.raises(ConfigError, match="roles.planner.adapter: only the Executor"):
        validate_role("roles.planner", RoleConfig(adapter="models/reader"))


def test_settings_are_checked_key_by_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: tiny-random\nepochs: 0\n")
    with pytest.raises(ConfigError, match="epochs: must be more than 0"):
        load_sft_settings(bad)
    bad.write_text("model: tiny-random\nlearning_rat: 0.1\n")
    with pytest.raises(ConfigError, match="unknown key 'learning_rat'"):
        load_sft_settings(bad)
    qwen = load_sft_settings(REPO / "training/configs/reader_qwen_cpu.yaml")
    assert (qwen.model, qwen.lora_layers, qwen.lora.r, qwen.weights_dtype) == ("qwen", 8, 16, "float32")
    assert load_sft_settings(REPO / "training/configs/reader_tiny_cpu.yaml").model == "tiny-random"
    bad.write_text("model: tiny-random\nepochs: one\n")
    with pytest.raises(ConfigError, match="epochs must be a float"):
        load_sft_settings(bad)


def test_a_run_resumes_only_on_the_examples_it_started_on(tmp_path):
    from training.reader_data import ReaderDataError

    data = tmp_path / "examples.jsonl"
    write_rows(example_rows(4), data)
    settings = settings_for(tmp_path, data, epochs=1.0, save_steps=1, validation_examples=0)
    train_reader(settings, command="test", progress=False)
    write_rows(example_rows(6), data)  # other examples, same file
    with pytest.raises(ReaderDataError, match="resuming would mix two datasets"):
        train_reader(settings, command="test", progress=False)


def test_settings_and_the_evaluation_manifest_name_the_reader_in_use(trained_on_tiny_gguf, tmp_path):
    from app.settings import role_rows
    from backend.eval.spec import role_identity

    gguf, run = trained_on_tiny_gguf
    bare = RoleConfig(backend="llamacpp", model_file=str(gguf))
    config = Config(data_dir=tmp_path / ".mia", roles={"planner": bare, "executor": replace(bare, adapter=str(run))})
    identity = role_identity(config)
    sha = read_reader_adapter(run).manifest["adapter_sha256"][:12]
    assert identity["executor"].endswith(f"+reader:{run.name}@{sha}") and "+reader" not in identity["planner"]
    rows = {row[0]: row for row in role_rows(config)}
    assert f"trained reader {run.name}" in rows["executor"][3] and "trained reader" not in rows["planner"][3]
