"""The upload cache's bound holds at write time, not only at the sweep: a real app server whose cache
may hold 3 MB takes uploads of 600 kB in a burst only while they fit, refuses the next with a
sentence, and makes room from files past their youth."""

from __future__ import annotations

import os
import time
from dataclasses import replace

import httpx
import pytest

from app.session import AppContext
from app.ui import launch
from app.upload_cache import CACHE_FULL, YOUNG_FILE_S, use_upload_cache
from tests.app.conftest import app_config, free_port, make_runtime

BOUND = 3_000_000
UPLOAD = 600_000


def cached_bytes(folder) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


@pytest.fixture
def small_cache_app(tmp_path, tiny_model_dir, shared_tools, embedder, monkeypatch):
    monkeypatch.setenv("GRADIO_TEMP_DIR", "")  # restored after the test, whatever use_upload_cache sets
    cache = use_upload_cache(tmp_path / "data")
    config = app_config(tmp_path / "data", tiny_model_dir)
    config = replace(config, app=replace(config.app, upload_cache_bytes=BOUND, max_image_bytes=1_000_000,
                                         max_document_bytes=1_000_000))
    runtime = make_runtime(config, shared_tools, embedder)
    port = free_port()
    demo = launch(AppContext(runtime), host="127.0.0.1", port=port, prevent_thread_lock=True)
    try:
        yield f"http://127.0.0.1:{port}", cache
    finally:
        demo.close()
        runtime.close()


def upload(client: httpx.Client, number: int) -> httpx.Response:
    return client.post("/gradio_api/upload", files=[("files", (f"scan-{number}.txt", bytes([65 + number]) * UPLOAD))])


def test_a_burst_of_uploads_stays_within_the_bound_and_the_one_without_room_is_refused(small_cache_app):
    url, cache = small_cache_app
    with httpx.Client(base_url=url, timeout=60) as client:
        landed = []
        for number in range(10):
            answer = upload(client, number)
            assert cached_bytes(cache) <= BOUND
            if answer.status_code != 200:
                break
            landed += answer.json()
        assert len(landed) == BOUND // UPLOAD - 1  # the multipart wrapping of the 5th takes it past 3 MB
        assert (answer.status_code, answer.text) == (507, CACHE_FULL)
        assert all(os.path.isfile(path) for path in landed)  # young files are never taken to make room

        # Past their youth, the oldest go to make room for the next upload, and only as many as it needs.
        aged = time.time() - YOUNG_FILE_S - 5
        for offset, path in enumerate(landed):
            os.utime(path, (aged + offset, aged + offset))
        again = upload(client, 10)
        assert again.status_code == 200 and cached_bytes(cache) <= BOUND
        assert [os.path.isfile(path) for path in landed] == [False, True, True, True]
