"""LLM backends: the ChatModel contract, the embedded SmolLM2 model and OpenAI-compatible servers.

Heavy modules (torch, transformers, httpx) load only when their names are first used.
"""

from backend.llm.base import ChatModel, Choice, Completion, LLMError, TokenLogprob

__all__ = [
    "ChatModel",
    "Choice",
    "Completion",
    "EmbeddedChatModel",
    "LLMError",
    "OpenAIChatModel",
    "TokenLogprob",
    "build_tiny_random_model",
    "default_gguf_path",
    "get_embedded_model",
    "prepare_embedded_model",
    "start_server_in_thread",
]

_LAZY = {
    "EmbeddedChatModel": "backend.llm.embedded",
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
