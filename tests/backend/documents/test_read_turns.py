"""One user's document reads take their turns (documents.reads_per_user), their place shown; another
user's read starts at once."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from backend.config import ConfigError, DocumentsConfig, validate_documents
from backend.documents import DocumentStore
from tests.waiting import wait_until


def note(path, text: str):
    path.write_text(f"# {text}\n\n{text} is written here.\n", encoding="utf-8")
    return path


def test_a_users_second_read_waits_for_the_first_and_another_user_does_not(tmp_path):
    store = DocumentStore(tmp_path / "documents", budget=replace(DocumentsConfig(), reads_per_user=1))
    first_reading, release_first = threading.Event(), threading.Event()
    said: dict[str, list[str]] = {"alice-2": [], "bob": []}

    def hold(fraction, text):  # alice's first read keeps her slot until released
        first_reading.set()
        release_first.wait(60)

    def recorder(who):
        return lambda fraction, text: said[who].append(text)

    threads = [threading.Thread(target=store.add_files, args=("alice", "notes", [(note(tmp_path / "a.md", "Alpha"), "a.md")]),
                                kwargs={"progress": hold})]
    threads[0].start()
    wait_until(first_reading.is_set, 30, "alice's first read to start")
    second = threading.Thread(target=store.add_files, args=("alice", "notes", [(note(tmp_path / "b.md", "Beta"), "b.md")]),
                              kwargs={"progress": recorder("alice-2")})
    second.start()
    wait_until(lambda: said["alice-2"], 30, "alice's second read to say it waits")
    assert said["alice-2"][0] == "waiting: 1 of your reads ahead of this one"
    store.add_files("bob", "notes", [(note(tmp_path / "c.md", "Gamma"), "c.md")], progress=recorder("bob"))
    assert not any(text.startswith("waiting") for text in said["bob"])  # bob read while alice's slot was taken
    assert second.is_alive() and not any("reading b.md" in text for text in said["alice-2"])  # still waiting
    release_first.set()
    threads[0].join(60)
    second.join(60)
    assert any("reading b.md" in text for text in said["alice-2"])
    assert store.has_documents("alice") and store.has_documents("bob")


def test_reads_per_user_is_at_least_one():
    with pytest.raises(ConfigError, match="documents.reads_per_user: must be at least 1"):
        validate_documents(replace(DocumentsConfig(), reads_per_user=0))
