"""The llama.cpp model's prompts (backend.llm.llamacpp): the GGUF's own chat template, rendered with
its markup as special tokens and every message's text as plain text, so a passage containing
"<|im_end|>" stays text; and the tokenizer's way back to text."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from backend.llm.base import LLMError, check_messages

_SENTINEL = "\x00mia-content-{}\x00"


class TemplatePrompts:
    """Part of LlamaCppChatModel, which sets `_template`, `_bos`, `_eos`, `_model`, `_llama_cpp` and
    `gguf_path`."""

    def prompt_ids(self, messages: list[dict], prefill: str = "") -> list[int]:
        """The chat template's markup as special tokens, every message's text (and the prefill) as plain text."""
        check_messages(messages)
        contents = [m["content"] for m in messages]
        plain = [{"role": m["role"], "content": _SENTINEL.format(i)} for i, m in enumerate(messages)]
        rendered = self._template.render(messages=plain, add_generation_prompt=True,
                                         bos_token=self._bos, eos_token=self._eos)
        ids: list[int] = []
        for index, content in enumerate(contents):
            marker = _SENTINEL.format(index)
            head, found, rendered = rendered.partition(marker)
            if not found:
                raise LLMError(f"The chat template of {self.gguf_path.name} dropped message {index}; use another model file.")
            ids += self._tokenize(head, special=True) + self._tokenize(content, special=False)
        return ids + self._tokenize(rendered, special=True) + self._tokenize(prefill, special=False)

    def _continuation_ids(self, messages: list[dict], prefill: str, prompt_ids: list[int], option: str) -> list[int]:
        """The tokens of `option` after the prompt as the tokenizer splits prefill+option; if a merge
        crosses the boundary, the option tokenised on its own."""
        joined = self.prompt_ids(messages, prefill + option)
        if joined[: len(prompt_ids)] == prompt_ids and len(joined) > len(prompt_ids):
            return joined[len(prompt_ids):]
        return self._tokenize(option, special=False)

    def _tokenize(self, text: str, *, special: bool) -> list[int]:
        if not text:
            return []
        return self._model.tokenize(text.encode("utf-8"), False, special)

    def _detokenize(self, ids: list[int]) -> str:
        return self._model.detokenize(ids, special=False).decode("utf-8", errors="replace")

    @lru_cache(maxsize=None)
    def _is_turn_end(self, token_id: int) -> bool:
        return bool(self._llama_cpp.llama_vocab_is_eog(self._model.vocab, token_id))


def compile_template(source: object, gguf_path: Path):
    if not isinstance(source, str) or not source.strip():
        raise LLMError(f"{gguf_path.name} carries no chat template; use a chat (instruct) model's GGUF.")
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise LLMError(f"The chat template of {gguf_path.name} refused the conversation: {message}")

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals["raise_exception"] = raise_exception
    return environment.from_string(source)
