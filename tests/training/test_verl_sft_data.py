"""The reader's examples as verl's multi-turn SFT rows, read by verl's own dataset: the prompt is not
trained, the reader's turn is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.llm.base import ModelTraits
from training.reader_data import reading_examples
from training.verl_recipe.sft_data import write_verl_sft

pytestmark = pytest.mark.verl  # needs verl: runs in .venv-train (requirements-train.txt)
TRAIN = Path(__file__).resolve().parents[2] / "data" / "hotpotqa" / "train.jsonl"
QWEN_TRAITS = ModelTraits(small=False, guided_turns=True, context_tokens=4096, executor_turns=4)


def test_verls_multiturn_sft_dataset_trains_the_readers_turn_only(tmp_path, tiny_model_dir):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    rows = []
    for line in TRAIN.read_text(encoding="utf-8").splitlines()[:8]:
        rows += [e.to_row() for e in reading_examples(json.loads(line), QWEN_TRAITS)]
    rows = [dict(row, split="train") for row in rows[:3]] + [dict(rows[3], split="validation")]
    files = write_verl_sft(rows, tmp_path / "verl")
    assert set(files) == {"train", "validation"}
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = OmegaConf.create({"messages_key": "messages", "max_length": 4096, "truncation": "error", "pad_mode": "right"})
    dataset = MultiTurnSFTDataset(str(files["train"]), tokenizer, config)
    assert len(dataset) == 3
    item = dataset[0]
    trained = tokenizer.decode(item["input_ids"][item["loss_mask"].bool()])
    answer_turn = "".join(s["text"] for s in rows[0]["segments"])
    assert answer_turn.strip() in trained and "Copy the sentence" not in trained
