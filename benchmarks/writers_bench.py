"""Committed memory writes per second with several writers at once, on SQLite and PostgreSQL.

    .venv/bin/python benchmarks/writers_bench.py                       # SQLite and pgvector, 1/4/8 writers
    .venv/bin/python benchmarks/writers_bench.py --backends sqlite --writers 1,8 --seconds 5

Each writer is its own process (as app processes or a learner are) with its own MemoryStore on one
database, writing memories of its own namespace (one user's each) for `--seconds`:

* `add`: one MemoryStore.add per memory, one committed transaction each (what a finished run does);
* `add_many`: batches of `--batch` memories, one embedding call and one commit per batch.

Every commit is durable as configured for production (SQLite WAL with synchronous=NORMAL,
PostgreSQL's default fsync on commit): the batch shares the commit, not less durability.
Embeddings: `--embed precomputed` (default) measures the store alone with vectors drawn around
random centres; `--embed real` runs all-MiniLM-L6-v2 in every writer (on 2 cores the embedding,
not the database, is then the limit). PostgreSQL is a pgserver started in `--workdir` unless
`--url` names one.
"""
from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.pgvector_bench import schema_url, start_server  # noqa: E402
from memory_db import MemoryStore, NewMemory, get_embedder  # noqa: E402

DIM = 384
GOAL = 500


class HashedEmbedder:
    """A unit vector per text, drawn from its hash around 200 centres: precomputed embeddings."""

    dim = DIM

    def __init__(self) -> None:
        self.centres = np.random.default_rng(7).standard_normal((200, DIM)).astype(np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            rng = np.random.default_rng(seed)
            v = self.centres[seed % 200] + 0.6 * rng.standard_normal(DIM).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows)


def _memory(writer: int, i: int) -> NewMemory:
    return NewMemory(question=f"Writer {writer} question {i}: which year did event {i * 7919 % 100003} happen?",
                     summary=f"Searched for event {i}; found its year in the second passage.",
                     plan="1. search the event\n2. read the year", correct=i % 3 != 0,
                     namespace=f"writer-{writer}", question_type="time")


def writer(url: str, index: int, mode: str, batch: int, seconds: float, embed: str, start_at: float, out) -> None:
    embedder = HashedEmbedder() if embed == "precomputed" else get_embedder()
    store = MemoryStore(url, embedder=embedder, merge_threshold=None)
    store.add(_memory(index, -1))  # connect, warm the embedder and the namespace before the clock starts
    while time.time() < start_at:
        time.sleep(0.005)
    written, latencies, i = 0, [], 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        if mode == "add":
            store.add(_memory(index, i))
            i += 1
            written += 1
        else:
            store.add_many([_memory(index, i + j) for j in range(batch)])
            i += batch
            written += batch
        latencies.append(time.perf_counter() - started)
    out.put({"written": written, "seconds": seconds, "latencies": latencies})
    store.close()


def run(url: str, writers: int, mode: str, batch: int, seconds: float, embed: str) -> dict:
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    start_at = time.time() + 8.0  # every writer has connected and warmed up by then
    processes = [context.Process(target=writer, args=(url, i, mode, batch, seconds, embed, start_at, out))
                 for i in range(writers)]
    for p in processes:
        p.start()
    results = [out.get(timeout=seconds + 180) for _ in processes]
    for p in processes:
        p.join()
    latencies = sorted(x for r in results for x in r["latencies"])
    total = sum(r["written"] for r in results)
    return {"per_s": total / seconds, "written": total,
            "p50_ms": 1000 * latencies[len(latencies) // 2], "p95_ms": 1000 * latencies[int(len(latencies) * 0.95)]}


def fresh_url(backend: str, workdir: Path, pg_url: str | None, label: str) -> str:
    if backend == "sqlite":
        path = workdir / f"{label}.sqlite"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return f"sqlite:///{path}"
    from sqlalchemy import create_engine, text

    schema = f"writers_{label}".replace("-", "_")
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    engine.dispose()
    return schema_url(pg_url, schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite, postgres (pgvector)")
    parser.add_argument("--writers", default="1,4,8")
    parser.add_argument("--modes", default="add,add_many")
    parser.add_argument("--batch", type=int, default=16, help="memories per add_many call")
    parser.add_argument("--seconds", type=float, default=10.0, help="each writer writes this long")
    parser.add_argument("--embed", choices=("precomputed", "real"), default="precomputed")
    parser.add_argument("--url", help="a PostgreSQL with pgvector (default: start one in --workdir)")
    parser.add_argument("--workdir", default="/tmp/mia-writers-bench")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    backends = [b.strip() for b in args.backends.split(",")]
    server, pg_url = None, args.url
    if "postgres" in backends and pg_url is None:
        server, pg_url = start_server(workdir)
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.seconds:g} s per run; "
          f"embeddings {args.embed}; add_many batches of {args.batch}; goal >= {GOAL}/s in total with 8 writers",
          flush=True)
    print("| backend | writers | call | memories/s (total) | per writer | call p50 ms | call p95 ms |")
    print("|---|---|---|---|---|---|---|")
    try:
        for backend in backends:
            for mode in [m.strip() for m in args.modes.split(",")]:
                for count in [int(w) for w in args.writers.split(",")]:
                    label = f"{backend}-{mode}-{count}"
                    url = fresh_url(backend, workdir, pg_url, label)
                    r = run(url, count, mode, args.batch, args.seconds, args.embed)
                    call = "add" if mode == "add" else f"add_many({args.batch})"
                    name = "SQLite" if backend == "sqlite" else "PostgreSQL+pgvector"
                    print(f"| {name} | {count} | {call} | {r['per_s']:,.0f} | {r['per_s'] / count:,.0f} | "
                          f"{r['p50_ms']:.1f} | {r['p95_ms']:.1f} |", flush=True)
    finally:
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    main()
