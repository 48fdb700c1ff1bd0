"""The tiny random Llama of backend.llm.tiny written as a GGUF file, to exercise GGUF preparation."""

from __future__ import annotations

from pathlib import Path

from backend.llm.gguf_import import default_gguf_path
from backend.llm.gguf_metadata import read_gguf_fields
from backend.llm.tiny import TINY_DISPLAY_NAME, random_llama


def build_tiny_random_gguf(target_path: Path, *, seed: int = 0):
    """Write the tiny random Llama (same weights as `build_tiny_random_model(seed=seed)`) as an F32 GGUF.

    The tokenizer metadata is copied from the SmolLM2 GGUF. Returns (path, the torch model written).
    """
    import gguf

    source = read_gguf_fields(default_gguf_path())
    model = random_llama(source["tokenizer.ggml.eos_token_id"].value, source["tokenizer.ggml.bos_token_id"].value,
                         len(source["tokenizer.ggml.tokens"].value), seed)
    config = model.config
    target_path = Path(target_path)
    target_path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(target_path), "llama")
    writer.add_name(TINY_DISPLAY_NAME)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    for key, field in source.items():
        if key.startswith("tokenizer."):
            item_type = gguf.GGUFValueType(field.item_type) if field.item_type is not None else None
            writer.add_key_value(key, field.value, gguf.GGUFValueType(field.value_type), sub_type=item_type)
    for name, tensor in _gguf_tensors(model):
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return target_path, model


_GGUF_LAYER_NAMES = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def _gguf_tensors(model):
    """(llama.cpp tensor name, float32 array) pairs; q/k rows permuted the way llama.cpp stores them."""
    config = model.config
    yield "token_embd.weight", model.model.embed_tokens.weight.detach().numpy()
    yield "output_norm.weight", model.model.norm.weight.detach().numpy()
    for index, layer in enumerate(model.model.layers):
        for hf_name, gguf_name in _GGUF_LAYER_NAMES.items():
            module = layer.get_submodule(hf_name)
            weights = module.weight.detach().numpy()
            if gguf_name == "attn_q":
                weights = _permute_rows(weights, config.num_attention_heads)
            elif gguf_name == "attn_k":
                weights = _permute_rows(weights, config.num_key_value_heads)
            yield f"blk.{index}.{gguf_name}.weight", weights


def _permute_rows(weights, heads: int):
    # llama.cpp interleaves the two rotary halves of every head; transformers undoes this on load.
    return (weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))
