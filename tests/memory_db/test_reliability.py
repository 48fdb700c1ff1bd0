"""Concurrency and crash safety on the real SQLite file."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from sqlalchemy import create_engine, text

from memory_db import MemoryStore, NewMemory

REPO_ROOT = Path(__file__).resolve().parents[2]
TOPICS = ["volcanoes", "jazz", "chess openings", "glaciers", "the Roman senate", "photosynthesis",
          "semiconductors", "the Silk Road"]


def test_eight_threads_writing_and_reading_at_once(open_store):
    store = open_store(merge_threshold=None)
    per_thread = 12
    errors: list[BaseException] = []
    written: dict[int, list[str]] = {}

    def worker(number: int) -> None:
        try:
            ids = []
            for i in range(per_thread):
                memory = store.add(NewMemory(f"Question {i} of writer {number} about {TOPICS[number]}?",
                                             f"summary {number}-{i}", "plan", i % 3 != 0, namespace=f"ns{number % 2}"))
                ids.append(memory.id)
                store.search_contrastive(f"What about {TOPICS[(number + i) % 8]}?", namespace=f"ns{number % 2}")
                store.record_outcome([ids[0]], correct=True, namespace=f"ns{number % 2}")
                store.count(namespace=f"ns{number % 2}")
            written[number] = ids
        except BaseException as exc:  # reported below; a thread's exception is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.count(namespace="ns0") == store.count(namespace="ns1") == 4 * per_thread
    for number, ids in written.items():
        assert len(set(ids)) == per_thread
        first = store.get(ids[0], namespace=f"ns{number % 2}")
        assert (first.usage_count, first.success_count) == (1 + per_thread, 1 + per_thread)


def test_two_stores_on_one_sqlite_file_write_without_lock_errors(tmp_path, embedder):
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    stores = [MemoryStore(url, embedder=embedder, merge_threshold=None) for _ in range(2)]
    errors = []

    def worker(store, tag):
        try:
            for i in range(15):
                store.add(NewMemory(f"{tag} question {i} on {TOPICS[i % 8]}?", "s", "p", True, namespace=tag))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s, f"t{i}")) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert stores[0].count(namespace="t0") == stores[1].count(namespace="t1") == 15
    for store in stores:
        store.close()


CHILD = textwrap.dedent("""
    import sys
    from memory_db import MemoryStore, NewMemory
    store = MemoryStore(sys.argv[1], merge_threshold=None)
    i = 0
    while True:
        memory = store.add(NewMemory(f"Crash test question number {i} about topic {i * 37 % 1000}?",
                                     "summary " + str(i), "plan", True, namespace="crash"))
        print(memory.id, flush=True)  # after commit: acknowledged
        i += 1
""")


def test_sigkill_mid_stream_loses_no_acknowledged_write(tmp_path, embedder):
    path = tmp_path / "crash.db"
    url = f"sqlite:///{path}"
    child = subprocess.Popen([sys.executable, "-c", CHILD, url], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, cwd=REPO_ROOT, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    acknowledged = []
    deadline = time.monotonic() + 120
    try:
        while len(acknowledged) < 25 and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            acknowledged.append(line.strip())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    acknowledged += [line.strip() for line in child.stdout.read().splitlines() if line.strip()]
    assert len(acknowledged) >= 25, "the child wrote too little before the kill"
    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
    engine.dispose()
    store = MemoryStore(url, embedder=embedder)
    try:
        stored = {m.id for m in store.list(namespace="crash", limit=10_000)}
        assert set(acknowledged) <= stored
        assert store.search_contrastive("Crash test question number 3 about topic 111?", namespace="crash",
                                        k=1).successful
    finally:
        store.close()
