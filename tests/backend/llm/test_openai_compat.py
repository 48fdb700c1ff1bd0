"""The OpenAI-compatible backend against real local HTTP servers on 127.0.0.1.

The main server is backend.llm.serve serving the tiny embedded model, so every answer can be checked
against the embedded model itself. Faulty servers (HTTP 500, garbage JSON) are small stdlib servers.
"""

from __future__ import annotations

import base64
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from backend.llm.base import ChatModel, Completion, LLMError
from backend.llm.openai_compat import OpenAIChatModel, normalise_base_url
from backend.llm.serve import start_server_in_thread

CHAT = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Which river is longest?"}]


@pytest.fixture(scope="module")
def served(tiny_chat_model):
    log: list[dict] = []
    base_url, stop = start_server_in_thread(tiny_chat_model, request_log=log)
    yield base_url, log
    stop()


@pytest.fixture
def client(served):
    base_url, log = served
    log.clear()
    model = OpenAIChatModel(base_url, "tiny-random-SmolLM2", supports_images=True)
    yield model
    model.close()


def test_generate_over_http_equals_the_embedded_model(client, tiny_chat_model):
    assert isinstance(client, ChatModel)
    assert client.name.startswith("openai:tiny-random-SmolLM2@http://127.0.0.1:")
    remote = client.generate(CHAT, max_new_tokens=10)
    local = tiny_chat_model.generate(CHAT, max_new_tokens=10)
    assert (remote.text, remote.finish_reason) == (local.text, "length")
    assert (remote.prompt_tokens, remote.completion_tokens) == (local.prompt_tokens, 10)


def test_prefill_and_stop_travel_as_vllm_expects(client, tiny_chat_model, served):
    full = tiny_chat_model.generate(CHAT, max_new_tokens=16, prefill="It is the").text
    stop = full[-5:-2]
    remote = client.generate(CHAT, max_new_tokens=16, prefill="It is the", stop=[stop])
    assert remote.text == full[: full.index(stop)] and remote.finish_reason == "stop"
    body = served[1][-1]
    assert body["messages"][-1] == {"role": "assistant", "content": "It is the"}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert body["stop"] == [stop] and body["temperature"] == 0.0 and body["max_tokens"] == 16


def test_stream_yields_deltas_then_one_completion_with_usage(client, tiny_chat_model):
    items = list(client.stream(CHAT, max_new_tokens=12))
    deltas, final = items[:-1], items[-1]
    assert isinstance(final, Completion) and all(isinstance(d, str) for d in deltas) and len(deltas) > 1
    assert "".join(deltas) == final.text == tiny_chat_model.generate(CHAT, max_new_tokens=12).text
    assert final.completion_tokens == 12 and final.finish_reason == "length"
    assert final.prompt_tokens == tiny_chat_model.count_tokens(tiny_chat_model.prompt_text(CHAT))


def test_choose_uses_guided_choice_and_the_models_own_scores(client, tiny_chat_model, served):
    options = ["yes", "no", "not sure"]
    remote = client.choose(CHAT, options, prefill="Verdict:")
    local = tiny_chat_model.choose(CHAT, options, prefill="Verdict:")
    assert remote.method == "guided" and remote.label == local.label
    assert remote.logprobs[remote.label] == pytest.approx(local.logprobs[local.label], abs=1e-4)
    body = served[1][-1]
    assert body["guided_choice"] == options and body["structured_outputs"] == {"choice": options}
    assert body["logprobs"] is True and body["top_logprobs"] == 20


@pytest.mark.parametrize("reject_unknown_fields", [False, True], ids=["ignores-guided", "rejects-guided"])
def test_choose_falls_back_to_first_token_logprobs_without_guided_choice(tiny_chat_model, reject_unknown_fields):
    first = tiny_chat_model.generate(CHAT, max_new_tokens=1, logprobs=5).logprobs[0]
    likely, less_likely = first.top[1][0], first.top[3][0]  # two tokens the model ranks high
    options = [less_likely + "…", likely + "…", "zzzz-never"]
    base_url, stop = start_server_in_thread(tiny_chat_model, guided_choice=False,
                                            reject_unknown_fields=reject_unknown_fields)
    try:
        choice = OpenAIChatModel(base_url, "tiny-random-SmolLM2").choose(CHAT, options)
    finally:
        stop()
    assert choice.method == "first-token-logprob"
    assert choice.label == likely + "…"
    assert choice.logprobs[likely + "…"] == pytest.approx(first.top[1][1], abs=1e-4)
    assert choice.logprobs["zzzz-never"] == float("-inf")


def test_choose_says_so_when_the_server_has_neither_guided_choice_nor_logprobs(tiny_chat_model):
    base_url, stop = start_server_in_thread(tiny_chat_model, guided_choice=False, logprobs=False)
    try:
        with pytest.raises(LLMError, match="supports neither guided choice nor logprobs"):
            OpenAIChatModel(base_url, "tiny-random-SmolLM2").choose(CHAT, ["yes", "no"])
    finally:
        stop()


def test_images_are_sent_as_data_url_parts(client, served, tmp_path):
    from PIL import Image

    picture = tmp_path / "chart.png"
    Image.new("RGB", (4, 3), (200, 30, 30)).save(picture)
    chat = [{"role": "user", "content": "What colour is this chart?", "image": str(picture)}]
    client.generate(chat, max_new_tokens=2)
    parts = served[1][-1]["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": "What colour is this chart?"}
    assert parts[1]["type"] == "image_url"
    header, payload = parts[1]["image_url"]["url"].split(",", 1)
    assert header == "data:image/png;base64" and base64.b64decode(payload) == picture.read_bytes()


def test_images_are_dropped_when_the_model_is_not_configured_for_them(served, tmp_path):
    model = OpenAIChatModel(served[0], "tiny-random-SmolLM2")
    model.generate([{"role": "user", "content": "Describe it.", "image": str(tmp_path / "x.png")}], max_new_tokens=1)
    assert served[1][-1]["messages"][0] == {"role": "user", "content": "Describe it."}


def test_count_tokens_and_ping_use_the_servers_tokenizer(client, tiny_chat_model):
    text = "Wikipedia says the Nile is 6,650 km long."
    assert client.count_tokens(text) == tiny_chat_model.count_tokens(text)
    assert 0 < client.ping() < 30


def test_count_tokens_without_a_tokenize_endpoint_uses_usage_of_tiny_requests(tiny_chat_model):
    base_url, stop = start_server_in_thread(tiny_chat_model, tokenize=False)
    try:
        model = OpenAIChatModel(base_url, "tiny-random-SmolLM2")
        for text in ["Wikipedia says the Nile is 6,650 km long.", "one"]:
            assert model.count_tokens(text) == tiny_chat_model.count_tokens(text)
    finally:
        stop()


def test_a_refused_port_names_the_url_and_what_to_check():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIChatModel(f"http://127.0.0.1:{port}", "any")
    assert model.base_url == f"http://127.0.0.1:{port}/v1"
    with pytest.raises(LLMError, match=rf"127\.0\.0\.1:{port}/v1/chat/completions.*server is running"):
        model.generate(CHAT)
    with pytest.raises(LLMError, match="server is running"):
        list(model.stream(CHAT))
    with pytest.raises(LLMError, match="server is running"):
        model.ping()


def test_a_wrong_model_name_points_at_the_model_setting(served):
    with pytest.raises(LLMError, match="404.*check the model name"):
        OpenAIChatModel(served[0], "gpt-9").generate(CHAT)


@pytest.mark.parametrize(("status", "body", "expected"), [
    (500, b'{"error": {"message": "CUDA out of memory"}}', r"HTTP 500: CUDA out of memory.*server's log"),
    (200, b"<html>captive portal</html>", r"not a JSON object.*OpenAI-compatible API"),
    (200, b'{"object": "chat.completion"}', r"returned no choices"),
])
def test_a_broken_server_gives_a_clear_error(status, body, expected):
    base_url, stop = _fixed_reply_server(status, body)
    try:
        model = OpenAIChatModel(base_url, "any", timeout_s=5)
        with pytest.raises(LLMError, match=expected):
            model.generate(CHAT)
        with pytest.raises(LLMError):
            list(model.stream(CHAT))
    finally:
        stop()


def test_a_silent_server_times_out_with_advice():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # accepts connections, never answers
    try:
        model = OpenAIChatModel(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", "any", timeout_s=0.5)
        with pytest.raises(LLMError, match=r"did not answer within 0.5 s"):
            model.generate(CHAT)
    finally:
        listener.close()


def test_bad_base_urls_and_images_are_refused_up_front(tmp_path):
    with pytest.raises(LLMError, match="not valid"):
        normalise_base_url("localhost:8000")
    assert normalise_base_url("https://api.example.com/openai/v1/") == "https://api.example.com/openai/v1"
    model = OpenAIChatModel("http://127.0.0.1:9/v1", "any", supports_images=True)
    with pytest.raises(LLMError, match="does not exist"):
        model.generate([{"role": "user", "content": "see", "image": str(tmp_path / "missing.png")}])


def _fixed_reply_server(status: int, body: bytes):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}/v1", stop
