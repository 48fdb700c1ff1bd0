"""The OpenAI-compatible server's HTTP side (backend.llm.serve): routes, the endpoints, the model
calls a chat request makes, and the JSON and server-sent-event responses, as vLLM gives them."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from backend.llm.base import ChatModel, Completion, LLMError, TokenLogprob
from backend.llm.serve_requests import BadRequest, ChatRequest, ServerOptions, parse_chat_request


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
