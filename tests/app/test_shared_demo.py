"""The app as a shared demo serves it, with logins: a real app server on 127.0.0.1, real sign-ins,
real downloads by URL. Files the app serves (exports, uploads) reach their own user only; sign-in is
throttled after wrong passwords."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from gradio_client import Client

from memory_db import NewMemory
from tests.app.conftest import USERS, serve_app


@pytest.fixture(scope="module")
def shared_app(tmp_path_factory, tiny_model_dir, shared_tools, embedder):
    url, ctx, stop = serve_app(tmp_path_factory.mktemp("files"), tiny_model_dir, shared_tools, embedder,
                               with_logins=True)
    yield url, ctx
    stop()


@contextmanager
def signed_in(url: str, user: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, timeout=30) as client:
        answer = client.post("/login", data={"username": user, "password": USERS[user][0]})
        assert answer.status_code == 200, answer.text
        yield client


def alice_exports(url: str, ctx, question: str, notes: str) -> dict:
    """Alice stores a memory and exports her namespace; the export's file data, as her page gets it."""
    ctx.runtime.store.add(NewMemory(question, notes, "1. search", True, namespace="alice"))
    alice_app = Client(url, auth=("alice", USERS["alice"][0]), download_files=False, verbose=False)
    exported, message = alice_app.predict("alice", api_name="/export_namespace")
    assert "Exported" in message
    return exported


def test_an_export_downloads_for_its_user_only(shared_app):
    url, ctx = shared_app
    link = alice_exports(url, ctx, "What is Alice's secret project?", "Alice's private notes.")["url"]

    with signed_in(url, "alice") as alice, signed_in(url, "bob") as bob, signed_in(url, "admin") as admin:
        mine = alice.get(link)
        assert mine.status_code == 200 and "Alice's private notes." in mine.text
        assert bob.get(link).status_code == 404
        assert admin.get(link).status_code == 404  # not even an admin downloads another user's file
        file_path = link.split("/gradio_api/file=", 1)[1]
        assert bob.get(f"/gradio_api/file/{file_path}").status_code == 404  # the older route too
    assert httpx.get(link).status_code == 404  # nor anybody signed out


def test_an_upload_downloads_for_its_uploader_only(shared_app):
    url, _ = shared_app
    with signed_in(url, "bob") as bob, signed_in(url, "alice") as alice:
        answer = bob.post("/gradio_api/upload", files={"files": ("bob-notes.jsonl", b'{"bob": "private"}\n')})
        assert answer.status_code == 200, answer.text
        [path] = answer.json()
        assert bob.get(f"/gradio_api/file={path}").text == '{"bob": "private"}\n'
        assert alice.get(f"/gradio_api/file={path}").status_code == 404


def test_wrong_passwords_lock_the_user_name_even_against_the_right_one(shared_app):
    url, _ = shared_app
    with httpx.Client(base_url=url, timeout=30) as guesser:
        for attempt in range(6):
            assert guesser.post("/login", data={"username": "carol", "password": f"guess-{attempt}"}).status_code == 400
        right = guesser.post("/login", data={"username": "carol", "password": USERS["carol"][0]})
        assert right.status_code == 400  # locked for a while, whatever the password
    with signed_in(url, "alice"):  # another user from the same address still signs in
        pass


def address_failures(ctx, address: str) -> int:
    count = ctx.runtime.store.login_failures().read(f"address:{address}", time.time())
    return count.failures if count else 0


def test_a_forged_x_forwarded_for_is_not_the_address_a_sign_in_is_counted_against(shared_app):
    url, ctx = shared_app
    before = address_failures(ctx, "127.0.0.1")
    forged = httpx.post(f"{url}/login", data={"username": "nobody", "password": "guess"},
                        headers={"X-Forwarded-For": "203.0.113.77"}, timeout=30)
    assert forged.status_code == 400
    assert address_failures(ctx, "127.0.0.1") == before + 1  # the connection's address, in the shared counts
    assert address_failures(ctx, "203.0.113.77") == 0


def call(client: httpx.Client, api_name: str, data: list) -> list:
    """One call of the UI's endpoint `api_name` with `data` as the browser would send it, raw."""
    started = client.post(f"/gradio_api/call/{api_name}", json={"data": data})
    assert started.status_code == 200, started.text
    answer = client.get(f"/gradio_api/call/{api_name}/{started.json()['event_id']}")
    lines = answer.text.splitlines()
    assert "event: complete" in lines, answer.text
    return json.loads(lines[lines.index("event: complete") + 1].removeprefix("data: "))


def test_an_import_never_reads_a_path_the_request_names(shared_app):
    url, ctx = shared_app
    exported = alice_exports(url, ctx, "What is Alice's import secret?", "Alice's notes to import.")
    forged = {"path": exported["path"], "meta": {"_type": "gradio.FileData"}}  # alice's file, named by bob
    with signed_in(url, "bob") as bob:
        preview = call(bob, "preview_import", ["bob", forged])
        imported = call(bob, "apply_import", ["bob", forged, "Skip them (keep the stored memories)"])
    assert "an import reads only a file you uploaded yourself" in preview[0] and preview[1]["data"] in ([], [[]])
    assert "an import reads only a file you uploaded yourself" in imported[0]
    assert ctx.runtime.store.count(namespace="bob") == 0
