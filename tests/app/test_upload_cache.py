"""Gradio's upload cache in the data folder, bounded: the app deletes the files it is done with (a
rejected upload, an imported one, an export once downloaded) and a sweep takes what is old or over
the size limit. A real app server on 127.0.0.1 with logins; real uploads, real downloads."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest
from gradio_client import Client, handle_file

from app.upload_cache import DOWNLOADED_GRACE_S, EMPTY_GRACE_S, UploadCache, use_upload_cache
from app.user_files import UserFiles
from memory_db import NewMemory
from tests.app.conftest import USERS, serve_app
from tests.waiting import wait_until

HOUR = 3600.0


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if not p.is_dir())


@pytest.fixture(scope="module")
def cached_app(tmp_path_factory, tiny_model_dir, shared_tools, embedder):
    """The app with logins, its Gradio cache in its data folder (as `serve` puts it), and a stale
    upload left there by an earlier run."""
    root = tmp_path_factory.mktemp("cached")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GRADIO_TEMP_DIR", "")  # restored after the module, whatever use_upload_cache sets
        cache = use_upload_cache(root / "data")
        stale = cache / ("0" * 40) / "left-from-yesterday.png"
        stale.parent.mkdir(parents=True)
        stale.write_bytes(b"old upload")
        os.utime(stale, (time.time() - 2 * HOUR, time.time() - 2 * HOUR))
        url, ctx, stop = serve_app(root, tiny_model_dir, shared_tools, embedder, with_logins=True)
        try:
            yield url, ctx, cache, stale
        finally:
            stop()


def as_user(url: str, user: str) -> Client:
    return Client(url, auth=(user, USERS[user][0]), download_files=False, verbose=False)


def test_the_cache_lies_in_the_data_folder_and_is_swept_at_start(cached_app):
    url, ctx, cache, stale = cached_app
    assert cache == (Path(ctx.runtime.config.data_dir) / "upload-cache").resolve()
    assert ctx.files.root.is_relative_to(cache)
    wait_until(lambda: not stale.exists(), 30, "the sweep at start to remove a stale upload")


def test_a_rejected_upload_and_a_downloaded_export_leave_nothing_behind_after_the_sweep(cached_app, tmp_path):
    url, ctx, cache, _ = cached_app
    ctx.runtime.store.add(NewMemory("Who wrote Dune?", "Searched the wiki.", "1. search", True, namespace="alice"))
    alice = as_user(url, "alice")
    bad = tmp_path / "not-an-export.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    text, _, _ = alice.predict("alice", handle_file(str(bad)), api_name="/preview_import")
    assert "Import rejected at line 1" in text and "Nothing was imported" in text
    assert not [p for p in files_under(cache) if p.name == bad.name]  # deleted as soon as it was rejected

    exported, message = alice.predict("alice", api_name="/export_namespace")
    assert "Exported 1 memories" in message
    written = Path(exported["path"])
    assert written.is_file() and written.is_relative_to(cache)
    with httpx.Client(base_url=url, timeout=30) as browser:
        assert browser.post("/login", data={"username": "alice", "password": USERS["alice"][0]}).status_code == 200
        download = browser.get(exported["url"])
        assert download.status_code == 200 and "Who wrote Dune?" in download.text
        assert browser.get(exported["url"]).status_code == 200  # a second click, a moment later, still works

        grace = max(DOWNLOADED_GRACE_S, EMPTY_GRACE_S) + 1
        UploadCache(cache, max_bytes=10**9, max_age_s=HOUR, files=ctx.files, clock=lambda: time.time() + grace).sweep()
        assert list(cache.rglob("*")) == []  # no file, and no folder left empty
        assert browser.get(exported["url"]).status_code == 404


def test_an_import_reads_the_callers_own_upload(cached_app, tmp_path):
    url, ctx, cache, _ = cached_app
    line = {"type": "memory", "id": "5b0f8d2a-6f4e-4c1e-9c39-2b7f6f1f0a11", "question": "Who painted the Mona Lisa?",
            "summary": "Searched the wiki.", "plan": "1. search", "correct": True}
    upload = tmp_path / "bob-export.jsonl"
    upload.write_text(json.dumps(line) + "\n", encoding="utf-8")
    bob = as_user(url, "bob")
    text, rows, _ = bob.predict("bob", handle_file(str(upload)), api_name="/preview_import")
    assert "1 memories" in text
    result = bob.predict("bob", handle_file(str(upload)), "Skip them (keep the stored memories)", api_name="/apply_import")
    assert "Imported 1 memories into `bob`" in result
    assert ctx.runtime.store.get(line["id"], namespace="bob").question == line["question"]


def test_the_sweep_deletes_downloaded_and_old_files_then_the_oldest_over_the_size_limit(tmp_path):
    now = time.time()
    ages = {"a/oldest.bin": 3 * HOUR, "b/old.bin": 50 * 60, "c/middle.bin": 40 * 60, "d/newer.bin": 30 * 60,
            "d/newest.bin": 60, "mine/f1/report.md": 5 * 60, "mine/f2/export.jsonl": 5 * 60}
    for name, age in ages.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * (1000 if name.endswith(".bin") else 10))
        os.utime(path, (now - age, now - age))
    for folder in ("a", "b", "c", "mine/f1"):
        os.utime(tmp_path / folder, (now - 2 * HOUR, now - 2 * HOUR))
    (tmp_path / "fresh-empty").mkdir()
    (tmp_path / "tmpleftover").touch()  # what gr.File(type="filepath") leaves on every call
    os.utime(tmp_path / "tmpleftover", (now - 120, now - 120))
    (tmp_path / "tmpupload").touch()  # an upload just begun
    files = UserFiles(tmp_path / "mine")
    for name, downloaded_ago in (("mine/f1/report.md", DOWNLOADED_GRACE_S + 1), ("mine/f2/export.jsonl", 5)):
        files.grant(tmp_path / name, "carol")
        files.mark_downloaded(tmp_path / name, now - downloaded_ago)
    cache = UploadCache(tmp_path, max_bytes=2500, max_age_s=HOUR, files=files, clock=lambda: now)

    report = cache.sweep()

    assert [p.relative_to(tmp_path).as_posix() for p in report.deleted] == \
        ["a/oldest.bin", "mine/f1/report.md", "tmpleftover", "b/old.bin", "c/middle.bin"]
    assert [p.relative_to(tmp_path).as_posix() for p in files_under(tmp_path)] == \
        ["d/newer.bin", "d/newest.bin", "mine/f2/export.jsonl", "tmpupload"]
    assert (report.kept_files, report.kept_bytes) == (4, 2010)
    assert not files.is_written_file(tmp_path / "mine/f1/report.md")  # its records go with it
    assert files.is_written_file(tmp_path / "mine/f2/export.jsonl")  # downloaded a moment ago: a second click works
    assert not (tmp_path / "a").exists() and not (tmp_path / "mine/f1").exists()
    assert (tmp_path / "fresh-empty").is_dir()  # a new folder is left its grace
