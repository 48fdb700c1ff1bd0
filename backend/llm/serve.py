"""A small OpenAI-compatible HTTP server for any ChatModel (stdlib only, binds 127.0.0.1 by default).

It shares the embedded model with other processes, and it is the faithful local server the OpenAI
backend is tested against. Endpoints: POST /v1/chat/completions (stream or not, usage, max_tokens,
stop, temperature, guided choice in both vLLM spellings, logprobs/top_logprobs,
continue_final_message), GET /v1/models, POST /tokenize (as vLLM), GET /health. A request's body
is checked in backend.llm.serve_requests and answered in backend.llm.serve_http; this module starts
the server.

    python -m backend.llm.serve --model-dir DIR --port 8000
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable
from pathlib import Path

from backend.llm.base import ChatModel
from backend.llm.serve_http import ChatServer
from backend.llm.serve_requests import ServerOptions


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
