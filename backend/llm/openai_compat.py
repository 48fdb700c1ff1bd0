"""A ChatModel over any OpenAI-compatible HTTP server (vLLM `vllm serve`, a hosted API, our own serve.py).

Plain httpx, no SDK. Prefill uses vLLM's `continue_final_message`; constrained choice asks for guided
choice (both vLLM spellings) and falls back to the first token's top log-probabilities.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import mimetypes
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from backend.llm.base import (
    Choice,
    Completion,
    LLMError,
    ModelTraits,
    check_messages,
    check_options,
    fit_stop_strings,
)
from backend.llm.stop_strings import find_stop, safe_prefix_length

TOP_LOGPROBS = 20  # the most the OpenAI API allows
MAX_STOP_STRINGS = 4  # vLLM's and OpenAI's cap on `stop` per request


def normalise_base_url(base_url: str) -> str:
    """'http://host:8000' -> 'http://host:8000/v1'; a URL with a path (…/v1, …/openai/v1) is kept."""
    base_url = base_url.strip().rstrip("/")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise LLMError(f"The LLM server URL {base_url!r} is not valid; write it like http://127.0.0.1:8000/v1.")
    return base_url if parts.path else base_url + "/v1"


class OpenAIChatModel:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        supports_images: bool = False,
        context_tokens: int = 8192,
        repetition_penalty: float = 1.0,
    ) -> None:
        if not model:
            raise LLMError("The OpenAI-compatible backend needs a model name (as the server lists it at /v1/models).")
        self.base_url = normalise_base_url(base_url)
        self.model = model
        self.supports_images = supports_images
        # vLLM's sampling extension, as the local backends penalise their own repeats; 1.0 sends nothing
        # (hosted APIs that refuse unknown fields).
        self.repetition_penalty = repetition_penalty
        self.timeout_s = timeout_s
        self.name = f"openai:{model}@{self.base_url}"
        # vLLM and OpenAI take at most 4 stop strings a request; further ones are applied here.
        self.traits = ModelTraits(small=False, max_stop_strings=MAX_STOP_STRINGS, context_tokens=context_tokens)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)
        self._chat_overhead: int | None = None  # tokens the chat template adds around one user message
        self._tokenize_endpoint: bool | None = None  # None until tried

    # ---- ChatModel ----------------------------------------------------------------------------

    def generate(
        self,
        messages: list[dict],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        prefill: str = "",
        temperature: float = 0.0,
    ) -> Completion:
        started = time.perf_counter()
        body = self._chat_body(messages, prefill, max_tokens=max_new_tokens, temperature=temperature, stop=stop)
        response = self._post("/chat/completions", body)
        choice = _first_choice(response, self.base_url)
        text = (choice.get("message") or {}).get("content") or ""
        finish = _finish_reason(choice.get("finish_reason"))
        cut = find_stop(text, stop)
        if cut is not None:  # a stop string beyond the server's cap
            text, finish = text[:cut], "stop"
        prompt_tokens, completion_tokens = self._usage(response.get("usage"), messages, prefill, text)
        return Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                          seconds=time.perf_counter() - started, finish_reason=finish)

    def stream(
        self,
        messages: list[dict],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        prefill: str = "",
        temperature: float = 0.0,
    ) -> Iterator[str | Completion]:
        body = self._chat_body(messages, prefill, max_tokens=max_new_tokens, temperature=temperature, stop=stop)
        body.update(stream=True, stream_options={"include_usage": True})
        return self._stream(body, messages, prefill, [s for s in stop if s])

    def choose(self, messages: list[dict], options: Sequence[str], *, prefill: str = "") -> Choice:
        """Guided choice when the server has it, else the first token's top log-probabilities.

        `Choice.logprobs`: the chosen label's summed token log-probs when guided; other options get the
        log-prob of their first token (exact for one-token options, an upper bound otherwise), or
        -inf when that token is not among the top alternatives the server returned.
        """
        options = check_options(options)
        longest = max(len(option.encode("utf-8")) for option in options)  # a token is at least one byte
        guided = self._chat_body(messages, prefill, max_tokens=longest + 1, temperature=0.0,
                                 logprobs=True, top_logprobs=TOP_LOGPROBS,
                                 guided_choice=options, structured_outputs={"choice": options})
        try:
            choice = _first_choice(self._post("/chat/completions", guided), self.base_url)
        except ServerRejected:  # e.g. a hosted API refusing the unknown guided-decoding fields
            choice = {}
        tokens = (choice.get("logprobs") or {}).get("content") or []
        text = (choice.get("message") or {}).get("content")
        if text in options:
            scores = _first_token_scores(options, tokens[0] if tokens else None)
            if tokens:
                scores[text] = sum(float(t["logprob"]) for t in tokens)
            return Choice(label=text, logprobs=scores, method="guided")
        if not tokens:
            plain = self._chat_body(messages, prefill, max_tokens=1, temperature=0.0,
                                    logprobs=True, top_logprobs=TOP_LOGPROBS)
            choice = _first_choice(self._post("/chat/completions", plain), self.base_url)
            tokens = (choice.get("logprobs") or {}).get("content") or []
        if not tokens:
            raise LLMError(
                f"The LLM server at {self.base_url} supports neither guided choice nor logprobs, so "
                f"{self.model} cannot pick among labels; use a vLLM server or the embedded model for this role."
            )
        scores = _first_token_scores(options, tokens[0])
        best = max(options, key=lambda option: scores[option])
        if math.isinf(scores[best]):
            raise LLMError(
                f"None of the options {options} starts with a token the model at {self.base_url} ranks in its "
                f"top {TOP_LOGPROBS}; rephrase the options (mind leading spaces) or use a server with guided choice."
            )
        return Choice(label=best, logprobs=scores, method="first-token-logprob")

    def count_tokens(self, text: str) -> int:
        """Exact count from the server's tokenizer: vLLM's /tokenize, else the usage of a 1-token request."""
        if self._tokenize_endpoint is not False:
            try:
                response = self._post("/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False},
                                      root=True)
                count = int(response["count"])
                self._tokenize_endpoint = True
                return count
            except (ServerRejected, KeyError, TypeError, ValueError):
                if self._tokenize_endpoint:
                    raise
                self._tokenize_endpoint = False
        if self._chat_overhead is None:
            self._chat_overhead = self._prompt_tokens_of("")
        return self._prompt_tokens_of(text) - self._chat_overhead

    def ping(self) -> float:
        """Seconds for a one-token request; raises LLMError saying what to check."""
        started = time.perf_counter()
        body = self._chat_body([{"role": "user", "content": "ping"}], "", max_tokens=1, temperature=0.0)
        _first_choice(self._post("/chat/completions", body), self.base_url)
        return time.perf_counter() - started

    def close(self) -> None:
        self._client.close()

    # ---- requests -----------------------------------------------------------------------------

    def _chat_body(self, messages: list[dict], prefill: str, **fields: object) -> dict:
        check_messages(messages)
        if fields.get("stop"):
            fields["stop"] = fit_stop_strings(fields["stop"], self.traits)
        else:
            fields.pop("stop", None)
        body = {"model": self.model, "messages": [self._message_payload(m) for m in messages], **fields}
        if self.repetition_penalty != 1.0 and "guided_choice" not in fields and fields.get("max_tokens", 2) > 1:
            body["repetition_penalty"] = self.repetition_penalty
        if prefill:
            body["messages"].append({"role": "assistant", "content": prefill})
            body.update(continue_final_message=True, add_generation_prompt=False)
        return body

    def _message_payload(self, message: dict) -> dict:
        image = message.get("image")
        if not image or not self.supports_images or message["role"] != "user":
            return {"role": message["role"], "content": message["content"]}
        return {"role": "user", "content": [
            {"type": "text", "text": message["content"]},
            {"type": "image_url", "image_url": {"url": _data_url(Path(image))}},
        ]}

    def _post(self, path: str, body: dict, *, root: bool = False) -> dict:
        url = self._url(path, root)
        with _translated_errors(url, self.timeout_s):
            response = self._client.post(url, json=body)
            _raise_for_status(response, url)
            return _json(response.content, url)

    def _stream(self, body: dict, messages: list[dict], prefill: str, stops: list[str]) -> Iterator[str | Completion]:
        """Deltas as they arrive; stop strings the server was not sent are found here, so nothing
        past one is shown (the tail that may grow into one is held back)."""
        started = time.perf_counter()
        url = self._url("/chat/completions")
        local_stops = stops[len(body.get("stop") or []):]
        text, shown = "", 0
        finish, usage, finished = None, None, False
        with _translated_errors(url, self.timeout_s), self._client.stream("POST", url, json=body) as response:
            if response.status_code >= 400:
                response.read()
                _raise_for_status(response, url)
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    finished = True
                    break
                chunk = _json(data.encode(), url)
                if "error" in chunk:
                    raise LLMError(f"The LLM server at {url} failed mid-answer: {_error_text(chunk)}; see its log.")
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or []:
                    delta = (choice.get("delta") or {}).get("content")
                    if delta:
                        text += delta
                        cut = find_stop(text, local_stops)
                        if cut is not None:
                            text, finish, finished = text[:cut], "stop", True
                            break
                        visible = safe_prefix_length(text, local_stops)
                        if visible > shown:
                            yield text[shown:visible]
                            shown = visible
                    finish = choice.get("finish_reason") or finish
                if finished:
                    break
        if not finished and finish is None:
            raise LLMError(
                f"The stream from {url} ended without a finished answer; check that the URL points to an "
                "OpenAI-compatible API and look at the server's log."
            )
        if len(text) > shown:
            yield text[shown:]
        prompt_tokens, completion_tokens = self._usage(usage, messages, prefill, text)
        yield Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                         seconds=time.perf_counter() - started, finish_reason=_finish_reason(finish))

    def _url(self, path: str, root: bool = False) -> str:
        base = self.base_url.removesuffix("/v1") if root else self.base_url
        return base + path

    def _usage(self, usage: dict | None, messages: list[dict], prefill: str, text: str) -> tuple[int, int]:
        if usage and "prompt_tokens" in usage and "completion_tokens" in usage:
            return int(usage["prompt_tokens"]), int(usage["completion_tokens"])
        prompt = sum(self.count_tokens(m["content"]) for m in messages) + (self.count_tokens(prefill) if prefill else 0)
        return prompt, self.count_tokens(text)

    def _prompt_tokens_of(self, text: str) -> int:
        body = self._chat_body([{"role": "user", "content": text}], "", max_tokens=1, temperature=0.0)
        usage = self._post("/chat/completions", body).get("usage") or {}
        if "prompt_tokens" not in usage:
            raise LLMError(
                f"The LLM server at {self.base_url} reports no token usage and has no /tokenize endpoint, "
                "so tokens cannot be counted; use a vLLM server or an API that returns usage."
            )
        return int(usage["prompt_tokens"])


# ---- helpers ----------------------------------------------------------------------------------


class ServerRejected(LLMError):
    """The server answered HTTP 4xx: it understood the request and refused it."""


@contextlib.contextmanager
def _translated_errors(url: str, timeout_s: float) -> Iterator[None]:
    try:
        yield
    except httpx.ConnectError as error:
        raise LLMError(
            f"Could not connect to the LLM server at {url} ({error}); check that the server is running "
            "(e.g. `vllm serve MODEL` or `python -m backend.llm.serve`) and that the base URL and port are right."
        ) from error
    except httpx.TimeoutException as error:
        raise LLMError(
            f"The LLM server at {url} did not answer within {timeout_s:g} s; check that it is not overloaded, "
            "or raise the timeout."
        ) from error
    except httpx.HTTPError as error:
        raise LLMError(f"The request to the LLM server at {url} failed ({error}); check the URL and the network.") from error


def _raise_for_status(response: httpx.Response, url: str) -> None:
    status = response.status_code
    if status < 400:
        return
    detail = _error_text(_maybe_json(response.content)) or response.text[:200].strip() or response.reason_phrase
    if status in (401, 403):
        raise ServerRejected(f"The LLM server at {url} refused the API key (HTTP {status}: {detail}); check the key.")
    if status == 404:
        raise ServerRejected(
            f"The LLM server at {url} answered 404 ({detail}); check the model name and that the base URL "
            "ends in /v1 (as in http://127.0.0.1:8000/v1)."
        )
    if status < 500:
        raise ServerRejected(f"The LLM server at {url} rejected the request (HTTP {status}: {detail}).")
    raise LLMError(f"The LLM server at {url} failed (HTTP {status}: {detail}); check the server's log and retry.")


def _maybe_json(content: bytes) -> dict | None:
    try:
        value = json.loads(content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _json(content: bytes, url: str) -> dict:
    value = _maybe_json(content)
    if value is None:
        raise LLMError(
            f"The server at {url} answered with something that is not a JSON object ({content[:80]!r}); "
            "check that the URL points to an OpenAI-compatible API."
        )
    return value


def _error_text(payload: dict | None) -> str:
    if not payload:
        return ""
    error = payload.get("error", payload.get("detail", ""))
    return str(error.get("message", error)) if isinstance(error, dict) else str(error)


def _first_choice(response: dict, url: str) -> dict:
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LLMError(f"The LLM server at {url} returned no choices; check that it is an OpenAI-compatible chat API.")
    return choices[0]


def _finish_reason(reason: str | None) -> str:
    return "length" if reason == "length" else "stop"


def _first_token_scores(options: list[str], first_token: dict | None) -> dict[str, float]:
    """Each option's log-prob from the longest top-ranked first token it starts with (-inf if none)."""
    candidates: list[tuple[str, float]] = []
    if first_token:
        candidates = [(t["token"], float(t["logprob"])) for t in first_token.get("top_logprobs") or []]
        candidates.append((first_token["token"], float(first_token["logprob"])))
    scores = {}
    for option in options:
        matches = [(len(token), lp) for token, lp in candidates if token and option.startswith(token)]
        scores[option] = max(matches)[1] if matches else float("-inf")
    return scores


def _data_url(path: Path) -> str:
    if not path.is_file():
        raise LLMError(f"The image {path} does not exist; attach an existing image file.")
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if not mime.startswith("image/"):
        raise LLMError(f"{path} is not an image file ({mime}); attach a PNG, JPEG, GIF or WebP image.")
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"
