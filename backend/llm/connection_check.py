"""Testing an OpenAI-compatible server from Settings (the openai entry of backend.llm.registry),
without turning Settings into a way to reach or scan the app's own network.

The server's address passes the page-visit tool's policy (public addresses only, unless an admin
allows private hosts), the request goes to the checked address itself, redirects are not followed,
and a failure is told as a status and a short reason of our own: nothing the server wrote is shown.
"""

from __future__ import annotations

import http
import json
import time

import httpx

from backend.llm.base import LLMError
from backend.llm.openai_compat import normalise_base_url
from backend.tools.base import ToolError
from backend.tools.url_safety import BlockedAddressError, request_to_address, resolve_checked

MAX_ANSWER_BYTES = 1_000_000
STATUS_ADVICE = {
    401: "check the API key",
    403: "check the API key",
    404: "check the model name and that the base URL ends in /v1 (as in http://127.0.0.1:8000/v1)",
    429: "the server is busy; try again in a minute",
}


class ConnectionProblem(LLMError):
    """The server cannot be used; the message is one sentence of ours, safe to show to the user."""


def check_address(base_url: str, *, allow_private: bool):
    """The checked address of `base_url` (backend.tools.url_safety.ResolvedURL), or ConnectionProblem."""
    try:
        return resolve_checked(base_url, allow_private=allow_private)
    except BlockedAddressError as blocked:
        raise ConnectionProblem(
            f"{blocked.host} resolves to a private or loopback address ({blocked.address}); the app does not "
            "connect there unless an admin ticks 'Allow private hosts' (for a server on this machine or network)."
        ) from None
    except ToolError as problem:
        raise ConnectionProblem(str(problem)[0].upper() + str(problem)[1:]) from None


def ping_server(base_url: str, model: str, api_key: str | None, *, allow_private: bool, timeout_s: float) -> float:
    """Seconds for a one-token chat request to `model` at `base_url`; ConnectionProblem otherwise."""
    try:
        base_url = normalise_base_url(base_url)  # as the served model will use it
    except LLMError as problem:
        raise ConnectionProblem(str(problem)) from None
    target = check_address(base_url + "/chat/completions", allow_private=allow_private)
    body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1, "temperature": 0}
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    started = time.perf_counter()
    failure = "nothing accepted the connection"
    with httpx.Client(timeout=timeout_s, follow_redirects=False, trust_env=False) as client:
        for address in target.addresses:
            request = request_to_address(client, "POST", target, address, headers=headers, json=body)
            try:
                response = client.send(request, stream=True)
            except httpx.ConnectError:
                continue
            except httpx.TimeoutException:
                raise ConnectionProblem(f"{base_url} did not answer within {timeout_s:g} s.") from None
            except httpx.HTTPError as problem:
                failure = f"the request failed ({type(problem).__name__})"
                continue
            try:
                _check_answer(base_url, response)
            finally:
                response.close()
            return time.perf_counter() - started
    raise ConnectionProblem(f"{base_url}: {failure}; check that the server is running and the host and port are right.")


def _check_answer(base_url: str, response: httpx.Response) -> None:
    status = response.status_code
    if status >= 300:
        try:
            reason = http.HTTPStatus(status).phrase  # the standard phrase: the server's own words are not shown
        except ValueError:
            reason = "non-standard status"
        advice = STATUS_ADVICE.get(status, "redirects are not followed: give the final base URL" if status < 400
                                   else "check the server's log")
        raise ConnectionProblem(f"{base_url} answered HTTP {status} ({reason}); {advice}.")
    content = bytearray()
    try:
        for chunk in response.iter_bytes():
            content += chunk
            if len(content) > MAX_ANSWER_BYTES:
                break
        answer = json.loads(bytes(content))
    except (httpx.HTTPError, ValueError):
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list) or not answer["choices"]:
        raise ConnectionProblem(
            f"{base_url} answered HTTP {status}, but not as an OpenAI-compatible chat API (no choices); "
            "check that the base URL points to one.")
