"""A tiny random Llama that speaks with the real SmolLM2 tokenizer: real code paths in seconds.

`build_tiny_random_model` saves a transformers folder (tests, CPU smoke training); tests/tiny_gguf.py
writes the same model as a GGUF file.
"""

from __future__ import annotations

from pathlib import Path

from backend.llm.gguf_import import default_gguf_path, load_gguf_tokenizer, write_manifest

TINY_DISPLAY_NAME = "tiny-random-SmolLM2"


def build_tiny_random_model(target_dir: Path, *, seed: int = 0) -> Path:
    """Save a 2-layer, 32-wide random LlamaForCausalLM with SmolLM2's tokenizer and chat template."""
    target_dir = Path(target_dir)
    tokenizer = load_gguf_tokenizer(default_gguf_path())
    model = random_llama(tokenizer.eos_token_id, tokenizer.bos_token_id, len(tokenizer), seed)
    target_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target_dir)
    tokenizer.save_pretrained(target_dir)
    write_manifest(target_dir, display_name=TINY_DISPLAY_NAME, seed=seed)
    return target_dir


def random_llama(eos_token_id: int, bos_token_id: int, vocab_size: int, seed: int):
    """The 2-layer, 32-wide LlamaForCausalLM, its weights drawn from `seed`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        # Wide initial weights give peaked, varied next-token choices instead of near-uniform logits.
        initializer_range=0.3,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=eos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = eos_token_id
    return model.eval()
