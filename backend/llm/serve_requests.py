"""What the OpenAI-compatible server (backend.llm.serve) accepts: a chat request's body checked
and read into a ChatRequest, each malformed field refused by a sentence (BadRequest, HTTP 400), and
the switches by which the server imitates other servers (ServerOptions)."""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.llm.base import LLMError, check_options

MAX_TOP_LOGPROBS = 20
DEFAULT_MAX_TOKENS = 512


MAX_STOP_STRINGS = 4


class BadRequest(Exception):
    """The request is malformed; the message is returned to the client with HTTP 400 (404 if `status`)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ChatRequest:
    messages: list[dict]
    prefill: str = ""
    max_tokens: int = DEFAULT_MAX_TOKENS
    stop: list[str] = field(default_factory=list)
    temperature: float = 1.0  # the OpenAI API default
    choices: list[str] | None = None
    top_logprobs: int | None = None  # None: no logprobs asked for
    stream: bool = False
    include_usage: bool = False


@dataclass
class ServerOptions:
    served_model_name: str
    guided_choice: bool = True  # False imitates servers without guided decoding (they ignore the fields)
    logprobs: bool = True  # False imitates servers that never return logprobs
    tokenize: bool = True  # False imitates hosted APIs without vLLM's /tokenize
    reject_unknown_fields: bool = False  # True imitates APIs that answer 400 to fields they do not know
    request_log: list[dict] | None = None  # every POST body, for inspection (tests, debugging)


def parse_chat_request(body: dict, options: ServerOptions, image_dir: Path) -> ChatRequest:
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise BadRequest("'messages' must be a non-empty list of {role, content} objects.")
    messages = [_plain_message(message, image_dir) for message in raw_messages]
    request = ChatRequest(messages=messages)
    if body.get("continue_final_message"):
        if messages[-1]["role"] != "assistant":
            raise BadRequest("continue_final_message needs the last message to be from the assistant.")
        request.prefill = messages.pop()["content"]
        if body.get("add_generation_prompt", True):
            raise BadRequest("continue_final_message requires add_generation_prompt to be false.")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None:
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise BadRequest("'max_tokens' must be a positive integer.")
        request.max_tokens = max_tokens
    stop = body.get("stop") or []
    request.stop = [stop] if isinstance(stop, str) else list(stop)
    if not all(isinstance(s, str) for s in request.stop):
        raise BadRequest("'stop' must be a string or a list of strings.")
    if len(request.stop) > MAX_STOP_STRINGS:  # as vLLM and OpenAI answer
        raise BadRequest(f"'stop' takes at most {MAX_STOP_STRINGS} strings; got {len(request.stop)}.")
    penalty = body.get("repetition_penalty")  # vLLM's extension; the local model applies its own
    if penalty is not None and (not isinstance(penalty, (int, float)) or isinstance(penalty, bool) or penalty <= 0):
        raise BadRequest("'repetition_penalty' must be a number > 0.")
    temperature = body.get("temperature")
    if temperature is not None:
        if not isinstance(temperature, (int, float)) or temperature < 0:
            raise BadRequest("'temperature' must be a number >= 0.")
        request.temperature = float(temperature)
    if body.get("n", 1) != 1:
        raise BadRequest("This server returns one choice per request; send n=1.")
    guided_fields = [key for key in ("guided_choice", "structured_outputs") if key in body]
    if guided_fields and not options.guided_choice and options.reject_unknown_fields:
        raise BadRequest(f"Unrecognized request argument supplied: {guided_fields[0]}")
    if options.guided_choice:
        choices = body.get("guided_choice") or (body.get("structured_outputs") or {}).get("choice")
        if choices is not None:
            try:
                request.choices = check_options(choices)
            except LLMError as error:
                raise BadRequest(str(error)) from error
    if options.logprobs and body.get("logprobs"):
        top = body.get("top_logprobs") or 0
        if not isinstance(top, int) or not 0 <= top <= MAX_TOP_LOGPROBS:
            raise BadRequest(f"'top_logprobs' must be an integer from 0 to {MAX_TOP_LOGPROBS}.")
        request.top_logprobs = top
    request.stream = bool(body.get("stream"))
    request.include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    return request


def _plain_message(message: Any, image_dir: Path) -> dict:
    if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant"):
        raise BadRequest("Each message needs a role of 'system', 'user' or 'assistant'.")
    content = message.get("content")
    if isinstance(content, str):
        return {"role": message["role"], "content": content}
    if not isinstance(content, list):
        raise BadRequest("A message's content must be a string or a list of content parts.")
    texts, plain = [], {"role": message["role"]}
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "image_url":
            plain["image"] = str(_save_data_url((part.get("image_url") or {}).get("url", ""), image_dir))
        else:
            raise BadRequest(f"Unsupported content part {kind!r}; send 'text' or 'image_url' parts.")
    plain["content"] = "\n".join(texts)
    return plain


def _save_data_url(url: str, image_dir: Path) -> Path:
    """Write a `data:image/...;base64,` URL to a file; this offline server cannot fetch http URLs."""
    header, _, payload = url.partition(",")
    if not header.startswith("data:image/") or not header.endswith(";base64"):
        raise BadRequest("Images must be sent as data:image/...;base64 URLs; this server cannot fetch URLs.")
    try:
        data = base64.b64decode(payload, validate=True)
    except binascii.Error as error:
        raise BadRequest("The image data URL is not valid base64.") from error
    suffix = header[len("data:image/"):-len(";base64")] or "bin"
    path = image_dir / f"{uuid.uuid4().hex}.{suffix}"
    path.write_bytes(data)
    return path
