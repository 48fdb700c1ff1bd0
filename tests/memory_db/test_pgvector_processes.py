"""Two processes on one PostgreSQL with pgvector: what one writes, the other retrieves on its very
next search, and neither ever loads a namespace into memory."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.postgres

REPO_ROOT = Path(__file__).resolve().parents[2]

# One store per process, driven by JSON commands on stdin, one JSON reply per line on stdout.
CHILD = textwrap.dedent('''
    import hashlib, json, sys
    import numpy as np
    from memory_db import MemoryStore, NewMemory

    class HashEmbedder:
        """The same vector for the same text in every process (no model to load)."""
        dim = 384
        def encode(self, texts):
            out = []
            for text in texts:
                seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
                vector = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
                out.append(vector / np.linalg.norm(vector))
            return np.stack(out)

    store = MemoryStore(sys.argv[1], embedder=HashEmbedder())
    loads = 0
    load = store._load_namespace
    def counted(namespace):
        global loads
        loads += 1
        return load(namespace)
    store._load_namespace = counted

    def shown(found):
        return [{"id": s.memory.id, "summary": s.memory.summary, "score": s.score,
                 "usage": s.memory.usage_count, "success": s.memory.success_count} for s in found]

    print(json.dumps({"ready": store._database_search is not None}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        op, ns = command["op"], "shared"
        if op == "add":
            memory = store.add(NewMemory(command["question"], command.get("summary", "s"), "p",
                                         command.get("correct", True), namespace=ns))
            reply = {"id": memory.id}
        elif op == "search":
            found = store.search_contrastive(command["question"], namespace=ns, k=5)
            reply = {"successful": shown(found.successful), "failed": shown(found.failed)}
        elif op == "relabel":
            store.relabel(command["id"], namespace=ns, correct=command["correct"])
            reply = {}
        elif op == "outcome":
            store.record_outcome([command["id"]], correct=command["correct"], namespace=ns)
            reply = {}
        elif op == "edit":
            store.edit(command["id"], namespace=ns, summary=command["summary"])
            reply = {}
        elif op == "delete":
            store.delete(command["id"], namespace=ns)
            reply = {}
        elif op == "undo_last":  # the newest change of the memory, as the Memory view's undo
            entry = store.history(command["id"], namespace=ns)[0]
            store.undo(entry.id, namespace=ns)
            reply = {"undone": entry.action}
        elif op == "count":
            reply = {"count": store.count(namespace=ns)}
        reply["loads"] = loads
        reply["indexes"] = len(store._indexes)
        print(json.dumps(reply), flush=True)
    store.close()
''')


class Process:
    def __init__(self, url: str):
        self.child = subprocess.Popen([sys.executable, "-c", CHILD, url], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT, text=True,
                                      env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
        assert self.read() == {"ready": True}, "the child's store does not search in the database"

    def send(self, **command) -> None:
        self.child.stdin.write(json.dumps(command) + "\n")
        self.child.stdin.flush()

    def read(self) -> dict:
        line = self.child.stdout.readline()
        if not line:
            raise AssertionError(f"the child died: {self.child.stderr.read()[-3000:]}")
        return json.loads(line)

    def __call__(self, **command) -> dict:
        self.send(**command)
        reply = self.read()
        assert reply.pop("loads") == 0 and reply.pop("indexes") == 0, "a namespace was loaded into the process"
        return reply

    def close(self) -> None:
        self.child.stdin.close()
        try:
            self.child.wait(timeout=30)
        finally:
            if self.child.poll() is None:
                self.child.kill()
                self.child.wait()


@pytest.fixture
def two_processes(postgres_url):
    processes = [Process(postgres_url), Process(postgres_url)]
    yield processes
    for process in processes:
        process.close()


def test_a_write_in_one_process_is_found_by_the_other_on_its_next_search(two_processes):
    writer, reader = two_processes
    question = "Which river flows through Vienna?"
    assert reader(op="search", question=question) == {"successful": [], "failed": []}

    memory_id = writer(op="add", question=question, summary="Searched the wiki: the Danube.")["id"]
    [shown] = reader(op="search", question=question)["successful"]
    assert shown["id"] == memory_id and shown["summary"] == "Searched the wiki: the Danube."

    writer(op="relabel", id=memory_id, correct=False)
    writer(op="outcome", id=memory_id, correct=False)
    found = reader(op="search", question=question)
    assert found["successful"] == [] and [m["id"] for m in found["failed"]] == [memory_id]
    assert (found["failed"][0]["usage"], found["failed"][0]["success"]) == (2, 1)
    assert found["failed"][0]["score"] == pytest.approx(0.7 + 0.3 * 0.5, abs=1e-6)

    writer(op="edit", id=memory_id, summary="Searched twice: the Danube, not the Rhine.")
    assert reader(op="search", question=question)["failed"][0]["summary"] == "Searched twice: the Danube, not the Rhine."
    # the other process undoes the edit it did not make (History is in the database)
    assert reader(op="undo_last", id=memory_id)["undone"] == "edit"
    assert writer(op="search", question=question)["failed"][0]["summary"] == "Searched the wiki: the Danube."

    # and the other way round
    other_id = reader(op="add", question="Who designed the Eiffel Tower?")["id"]
    assert [m["id"] for m in writer(op="search", question="Who designed the Eiffel Tower?")["successful"]] == [other_id]

    writer(op="delete", id=memory_id)
    assert reader(op="search", question=question)["failed"] == []
    reader(op="delete", id=other_id)
    assert writer(op="search", question="Who designed the Eiffel Tower?") == {"successful": [], "failed": []}


def test_two_processes_adding_the_same_question_at_once_keep_one_memory(two_processes):
    """Writers of one namespace take turns across processes, so the second sees the first's
    memory as an exact repeat (as on SQLite) instead of storing it twice."""
    first, second = two_processes
    for round_number in range(5):
        question = f"What is the boiling point of water at altitude {round_number}?"
        for process in (first, second):
            process.send(op="add", question=question)
        ids = {first.read()["id"], second.read()["id"]}
        assert len(ids) == 1
    assert first(op="count")["count"] == 5
