"""A small OpenAI-compatible HTTP server for any ChatModel (stdlib only, binds 127.0.0.1 by default).

It shares the embedded model with other processes, and it is the faithful local server the OpenAI
backend is tested against. Endpoints: POST /v1/chat/completions (stream or not, usage, max_tokens,
stop, temperature, guided choice in both vLLM spellings, logprobs/top_logprobs,
continue_final_message), GET /v1/models, POST /tokenize (as vLLM), GET /health.

    python -m backend.llm.serve --model-dir DIR --port 8000
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from backend.llm.base import ChatModel, Completion, LLMError, TokenLogprob, check_options

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


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], model: ChatModel, options: ServerOptions) -> None:
        super().__init__(address, ChatRequestHandler)
        self.model = model
        self.options = options
        self.adapters: dict[str, ChatModel] = {}  # LoRA adapters loaded at run time, by name (as vLLM)
        self.image_dir = Path(tempfile.mkdtemp(prefix="mia-serve-images-"))

    def server_close(self) -> None:
        super().server_close()
        shutil.rmtree(self.image_dir, ignore_errors=True)


class ChatRequestHandler(BaseHTTPRequestHandler):
    server: ChatServer
    protocol_version = "HTTP/1.0"  # one response per connection: streams end when the socket closes

    def log_message(self, format: str, *args: Any) -> None:  # keep the terminal for real errors
        pass

    # ---- routing ------------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            names = [self.server.options.served_model_name, *self.server.adapters]
            self._send_json(200, {"object": "list", "data": [
                {"id": name, "object": "model", "created": int(time.time()), "owned_by": "mia"} for name in names]})
        elif path == "/health":
            self._send_json(200, {"status": "ok"})
        else:
            self._send_error(404, f"No route for GET {self.path}.")

    def do_POST(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        try:
            body = self._read_json()
            if self.server.options.request_log is not None:
                self.server.options.request_log.append(body)
            if path in ("/v1/chat/completions", "/chat/completions"):
                self._chat_completions(body)
            elif path == "/tokenize" and self.server.options.tokenize:
                self._tokenize(body)
            elif path in ("/v1/load_lora_adapter", "/load_lora_adapter"):
                self._load_lora_adapter(body)
            elif path in ("/v1/unload_lora_adapter", "/unload_lora_adapter"):
                self._unload_lora_adapter(body)
            else:
                self._send_error(404, f"No route for POST {self.path}.")
        except BadRequest as error:
            self._send_error(error.status, str(error))
        except LLMError as error:
            self._send_error(400, str(error))
        except Exception as error:  # the client gets a 500 with the reason instead of a dropped socket
            self._send_error(500, f"The model failed: {type(error).__name__}: {error}")

    # ---- endpoints ----------------------------------------------------------------------------

    def _load_lora_adapter(self, body: dict) -> None:
        """vLLM's runtime LoRA loading: {"lora_name", "lora_path"}; the name then serves as a model."""
        name, path = body.get("lora_name"), body.get("lora_path")
        if not isinstance(name, str) or not name or not isinstance(path, str) or not path:
            raise BadRequest("POST /v1/load_lora_adapter needs 'lora_name' and 'lora_path' strings.")
        if name in self.server.adapters or name == self.server.options.served_model_name:
            raise BadRequest(f"The lora adapter '{name}' has already been loaded.")
        base_dir = getattr(self.server.model, "model_dir", None)
        if base_dir is None:
            raise BadRequest("This server's model cannot take LoRA adapters.")
        from backend.llm.embedded import EmbeddedChatModel

        self.server.adapters[name] = EmbeddedChatModel(Path(base_dir), adapter_dir=Path(path), name=name)
        self._send_json(200, {"message": f"Success: LoRA adapter '{name}' added successfully."})

    def _unload_lora_adapter(self, body: dict) -> None:
        """vLLM's runtime LoRA unloading: {"lora_name"}; the name no longer serves."""
        name = body.get("lora_name")
        if name not in self.server.adapters:
            raise BadRequest(f"The lora adapter '{name}' cannot be found.", 404)
        del self.server.adapters[name]
        self._send_json(200, {"message": f"Success: LoRA adapter '{name}' removed successfully."})

    def _model_for(self, body: dict) -> ChatModel:
        self._check_model_name(body)
        return self.server.adapters.get(body.get("model"), self.server.model)

    def _tokenize(self, body: dict) -> None:
        model = self._model_for(body)
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise BadRequest("POST /tokenize needs a 'prompt' string.")
        tokens = model.encode(prompt) if hasattr(model, "encode") else None
        count = len(tokens) if tokens is not None else model.count_tokens(prompt)
        self._send_json(200, {"count": count, "tokens": tokens or [],
                              "max_model_len": getattr(model, "context_length", None)})

    def _chat_completions(self, body: dict) -> None:
        model = self._model_for(body)
        request = parse_chat_request(body, self.server.options, self.server.image_dir)
        if request.choices is not None:
            label, details = _guided_choice(model, request)
            completion = Completion(text=label, prompt_tokens=_prompt_tokens(model, request),
                                    completion_tokens=len(details) if details else model.count_tokens(label),
                                    seconds=0.0, finish_reason="stop", logprobs=details)
            deltas = iter([label])
        elif request.stream:
            deltas, completion = model.stream(request.messages, **_generation_kwargs(request)), None
        else:
            completion = model.generate(request.messages, **_generation_kwargs(request, model))
            deltas = iter(())
        if request.stream:
            self._send_stream(request, deltas, completion)
        else:
            self._send_json(200, self._completion_body(request, completion))

    # ---- responses ----------------------------------------------------------------------------

    def _completion_body(self, request: ChatRequest, completion: Completion) -> dict:
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.server.options.served_model_name,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": completion.text},
                "logprobs": _logprobs_body(completion.logprobs) if request.top_logprobs is not None
                and completion.logprobs is not None else None,
                "finish_reason": completion.finish_reason,
            }],
            "usage": _usage(completion),
        }

    def _send_stream(self, request: ChatRequest, deltas, completion: Completion | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        chunk_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

        def event(choices: list[dict], usage: dict | None = None) -> None:
            payload = {"id": chunk_id, "object": "chat.completion.chunk", "created": created,
                       "model": self.server.options.served_model_name, "choices": choices}
            if usage is not None:
                payload["usage"] = usage
            self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()

        event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        try:
            for item in deltas:
                if isinstance(item, Completion):
                    completion = item
                else:
                    event([{"index": 0, "delta": {"content": item}, "finish_reason": None}])
        except Exception as error:  # headers are sent: report in-band, as vLLM does
            message = f"The model failed while streaming: {type(error).__name__}: {error}"
            self.wfile.write(f"data: {json.dumps({'error': {'message': message, 'code': 500}})}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            return
        assert completion is not None
        event([{"index": 0, "delta": {}, "finish_reason": completion.finish_reason}])
        if request.include_usage:
            event([], usage=_usage(completion))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _read_json(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise BadRequest(f"The request body is not valid JSON: {error}.") from error
        if not isinstance(body, dict):
            raise BadRequest("The request body must be a JSON object.")
        return body

    def _check_model_name(self, body: dict) -> None:
        name = self.server.options.served_model_name
        if body.get("model") not in (None, name, *self.server.adapters):
            raise BadRequest(f"The model `{body.get('model')}` does not exist; this server serves `{name}`.", 404)

    def _send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str) -> None:
        kind = {400: "BadRequestError", 404: "NotFoundError"}.get(status, "InternalServerError")
        self._send_json(status, {"error": {"message": message, "type": kind, "code": status}})


# ---- request parsing --------------------------------------------------------------------------


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


# ---- model calls ------------------------------------------------------------------------------


def _generation_kwargs(request: ChatRequest, model: ChatModel | None = None) -> dict:
    kwargs = {"max_new_tokens": request.max_tokens, "stop": request.stop, "prefill": request.prefill,
              "temperature": request.temperature}
    if model is not None and request.top_logprobs is not None and getattr(model, "supports_logprobs", False):
        kwargs["logprobs"] = request.top_logprobs
    return kwargs


def _guided_choice(model: ChatModel, request: ChatRequest) -> tuple[str, list[TokenLogprob] | None]:
    """The best option, with per-token log-probabilities when the model can give them."""
    if getattr(model, "supports_logprobs", False):
        scored = model.score_options(request.messages, request.choices, prefill=request.prefill,
                                     top_logprobs=request.top_logprobs or 0)
        sums = [sum(t.logprob for t in tokens) for tokens in scored]
        best = max(range(len(sums)), key=sums.__getitem__)
        return request.choices[best], scored[best]
    return model.choose(request.messages, request.choices, prefill=request.prefill).label, None


def _prompt_tokens(model: ChatModel, request: ChatRequest) -> int:
    if hasattr(model, "prompt_ids"):
        return len(model.prompt_ids(request.messages, request.prefill))
    return sum(model.count_tokens(m["content"]) for m in request.messages) + model.count_tokens(request.prefill)


def _usage(completion: Completion) -> dict:
    return {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
            "total_tokens": completion.prompt_tokens + completion.completion_tokens}


def _logprobs_body(details: list[TokenLogprob]) -> dict:
    def entry(token: str, logprob: float) -> dict:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}

    return {"content": [{**entry(d.token, d.logprob), "top_logprobs": [entry(t, lp) for t, lp in d.top]}
                        for d in details]}


# ---- starting ---------------------------------------------------------------------------------


def start_server_in_thread(
    model: ChatModel,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    served_model_name: str | None = None,
    guided_choice: bool = True,
    logprobs: bool = True,
    tokenize: bool = True,
    reject_unknown_fields: bool = False,
    request_log: list[dict] | None = None,
) -> tuple[str, Callable[[], None]]:
    """Serve `model` from a background thread; returns its base URL (ending in /v1) and a stop function.

    The feature switches imitate other servers (hosted APIs, older vLLM) for testing clients.
    """
    options = ServerOptions(served_model_name=served_model_name or _default_served_name(model),
                            guided_choice=guided_choice, logprobs=logprobs, tokenize=tokenize,
                            reject_unknown_fields=reject_unknown_fields, request_log=request_log)
    server = ChatServer((host, port), model, options)
    thread = threading.Thread(target=server.serve_forever, name="mia-llm-serve", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

    bound_host, bound_port = server.server_address[:2]
    return f"http://{bound_host}:{bound_port}/v1", stop


def _default_served_name(model: ChatModel) -> str:
    return model.name.split(":", 1)[-1]  # "embedded:SmolLM2-135M-Instruct" -> "SmolLM2-135M-Instruct"


def main(argv: list[str] | None = None) -> None:
    from backend.llm.embedded import EmbeddedChatModel, prepare_embedded_model

    parser = argparse.ArgumentParser(description="Serve an embedded model over an OpenAI-compatible API.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", type=Path, help="a transformers model folder (e.g. a prepared SmolLM2)")
    source.add_argument("--cache-dir", type=Path, help="prepare the bundled SmolLM2 here (first use) and serve it")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", help="the model name clients send (default: the folder's name)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args(argv)
    model_dir = args.model_dir or prepare_embedded_model(args.cache_dir)
    model = EmbeddedChatModel(model_dir, threads=args.threads)
    options = ServerOptions(served_model_name=args.served_model_name or _default_served_name(model))
    server = ChatServer((args.host, args.port), model, options)
    print(f"Serving {options.served_model_name} at http://{args.host}:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
