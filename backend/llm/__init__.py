"""LLM backends: the ChatModel contract, GGUF models on llama.cpp (the default), SmolLM2 on
transformers ("embedded") and OpenAI-compatible servers.

Heavy modules (torch, transformers, httpx) load only when their names are first used.
"""

from backend.llm.base import ChatModel, Choice, Completion, LLMError, ModelTraits, TokenLogprob

__all__ = [
    "ChatModel",
    "Choice",
    "Completion",
    "EmbeddedChatModel",
    "LLMError",
    "LlamaCppChatModel",
    "ModelTraits",
    "OpenAIChatModel",
    "TokenLogprob",
    "build_tiny_random_model",
    "default_gguf_path",
    "assemble_qwen_gguf",
    "get_embedded_model",
    "get_llamacpp_model",
    "prepare_embedded_model",
    "start_server_in_thread",
]

_LAZY = {
    "EmbeddedChatModel": "backend.llm.embedded",
    "LlamaCppChatModel": "backend.llm.llamacpp",
    "get_llamacpp_model": "backend.llm.llamacpp",
    "assemble_qwen_gguf": "backend.llm.model_parts",
    "get_embedded_model": "backend.llm.embedded",
    "default_gguf_path": "backend.llm.gguf_import",
    "prepare_embedded_model": "backend.llm.gguf_import",
    "OpenAIChatModel": "backend.llm.openai_compat",
    "build_tiny_random_model": "backend.llm.tiny",
    "start_server_in_thread": "backend.llm.serve",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'backend.llm' has no attribute {name!r}")
