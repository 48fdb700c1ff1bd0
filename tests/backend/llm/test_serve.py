"""The OpenAI-compatible server, spoken to with plain HTTP as any client (vLLM's clients, curl) would."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from backend.llm.serve import start_server_in_thread

REPO_ROOT = Path(__file__).resolve().parents[3]

CHAT = [{"role": "user", "content": "Give me a fact about owls."}]


@pytest.fixture(scope="module")
def base_url(tiny_chat_model):
    url, stop = start_server_in_thread(tiny_chat_model)
    yield url
    stop()


def test_it_binds_to_this_machine_only_and_lists_its_model(base_url):
    assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
    models = httpx.get(f"{base_url}/models").json()
    assert [m["id"] for m in models["data"]] == ["tiny-random-SmolLM2"]
    assert httpx.get(base_url.removesuffix("/v1") + "/health").status_code == 200


def test_logprobs_describe_the_generated_tokens(base_url, tiny_chat_model):
    reply = httpx.post(f"{base_url}/chat/completions", json={
        "model": "tiny-random-SmolLM2", "messages": CHAT, "max_tokens": 6, "temperature": 0,
        "logprobs": True, "top_logprobs": 3}).json()
    choice = reply["choices"][0]
    tokens = choice["logprobs"]["content"]
    assert "".join(t["token"] for t in tokens) == choice["message"]["content"]
    assert reply["usage"]["completion_tokens"] == len(tokens) == 6
    for token in tokens:
        alternatives = [alt["logprob"] for alt in token["top_logprobs"]]
        assert len(alternatives) == 3 and alternatives == sorted(alternatives, reverse=True)
        assert token["logprob"] <= alternatives[0] + 1e-6 and bytes(token["bytes"]).decode() == token["token"]
    assert choice["message"]["content"] == tiny_chat_model.generate(CHAT, max_new_tokens=6).text


def test_streaming_follows_the_openai_chunk_format(base_url):
    body = {"model": "tiny-random-SmolLM2", "messages": CHAT, "max_tokens": 5, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body) as response:
        assert response.headers["content-type"] == "text/event-stream"
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)


def test_guided_choice_streams_the_label(base_url):
    body = {"model": "tiny-random-SmolLM2", "messages": CHAT, "stream": True,
            "structured_outputs": {"choice": ["true", "false"]}}
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body) as response:
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    text = "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1]
                   if json.loads(e)["choices"])
    assert text in ("true", "false")


@pytest.mark.parametrize(("body", "status", "message"), [
    ("{not json", 400, "not valid JSON"),
    ({"model": "tiny-random-SmolLM2", "messages": []}, 400, "non-empty list"),
    ({"model": "tiny-random-SmolLM2", "messages": CHAT, "continue_final_message": True,
      "add_generation_prompt": False}, 400, "last message to be from the assistant"),
    ({"model": "tiny-random-SmolLM2", "messages": CHAT, "n": 2}, 400, "n=1"),
    ({"model": "tiny-random-SmolLM2", "messages": CHAT, "max_tokens": 0}, 400, "positive integer"),
    ({"model": "tiny-random-SmolLM2", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://example.com/a.png"}}]}]}, 400, "data:image"),
    ({"model": "other", "messages": CHAT}, 404, "does not exist"),
])
def test_bad_requests_get_an_openai_style_error(base_url, body, status, message):
    content = body if isinstance(body, str) else json.dumps(body)
    reply = httpx.post(f"{base_url}/chat/completions", content=content,
                       headers={"Content-Type": "application/json"})
    assert reply.status_code == status
    assert message in reply.json()["error"]["message"]


def test_command_line_serves_a_model_folder(tiny_model_dir):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "backend.llm.serve", "--model-dir", str(tiny_model_dir), "--port", str(port)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if line.startswith("Serving") or not line:
                break
        assert line.strip() == f"Serving tiny-random-SmolLM2 at http://127.0.0.1:{port}/v1"
        reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={
            "model": "tiny-random-SmolLM2", "messages": CHAT, "max_tokens": 3}, timeout=60).json()
        assert reply["usage"]["completion_tokens"] == 3
    finally:
        process.terminate()
        process.wait(timeout=30)
