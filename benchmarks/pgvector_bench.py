"""PostgreSQL: the in-process index against pgvector's HNSW index, on the same database.

    .venv/bin/python benchmarks/pgvector_bench.py --size 10k
    .venv/bin/python benchmarks/pgvector_bench.py --size 10k --processes 4
    .venv/bin/python benchmarks/pgvector_bench.py --size 1M --keep      # keep the built table for reruns

Without --url it starts its own PostgreSQL 16 + pgvector (the pgserver wheel) in --workdir.
One namespace, one bucket of N memories: random unit vectors around 2,000 centres (as
memory_bench.py's 100k and 1M; isotropic noise has no neighbours worth finding), labels and
counts drawn as there; queries are stored vectors plus noise. The rows are bulk-loaded with COPY
(bytes and vector columns), then the HNSW index is built; the timed writes go through
MemoryStore.add. Query embedding is excluded (search_contrastive_vectors).

For each path, "in process" (IndexSettings(database_search=False): the namespace loaded into the
process, exact below 50k memories, a FAISS inverted file above) and "pgvector" (search in SQL
through the HNSW index):

* cold start: opening the store and its first search (in process: loading the namespace);
* p50 / p95: search latency, wall clock; with --processes P, P processes search at once (each its
  own store; in process each loads its own copy) and the percentiles are over all their queries;
* q/s: searches per second, all processes together;
* recall@k: of the exact top k successful and k failed memories (every vector compared, the
  store's own scoring), the share returned;
* after a write: the first search after another process wrote to the namespace (in process:
  the namespace is reloaded whole; pgvector: nothing to reload);
* writes/s: MemoryStore.add, one committed transaction each (pgvector: the HNSW insert included);
* RSS: a searching process's peak resident memory (in process: the namespace's index is in it).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from sqlalchemy import create_engine, text  # noqa: E402

from benchmarks.memory_bench import DIM, clustered_unit_vectors, parse_size, peak_rss_mb  # noqa: E402
from memory_db import IndexSettings, MemoryStore, NewMemory  # noqa: E402
from memory_db.pgvector import HNSW_EF_CONSTRUCTION, HNSW_INDEX, HNSW_M, vector_literal  # noqa: E402
from memory_db.records import QUESTION_TYPES  # noqa: E402
from memory_db.vector_index import BucketIndex  # noqa: E402

NAMESPACE = "bench"
WRITES = 50


# ---- data (memory_bench.py's random path) -----------------------------------------------------
def dataset(size: int, n_queries: int):
    centres = np.random.default_rng(0).standard_normal((2_000, DIM)).astype(np.float32)
    stored = clustered_unit_vectors(size, 1, centres)
    rng = np.random.default_rng(2)
    picks = stored[rng.integers(0, size, n_queries)] + 0.05 * rng.standard_normal((n_queries, DIM), np.float32)
    queries = (picks / np.linalg.norm(picks, axis=1, keepdims=True)).astype(np.float32)
    writes = clustered_unit_vectors(WRITES * 2, 3, centres)
    rng = np.random.default_rng(7)
    correct = rng.random(size) < 0.6
    usage = rng.integers(1, 11, size)
    success = rng.integers(0, usage + 1)
    return stored, queries, writes, correct, usage, success


class PrecomputedEmbedder:
    dim = DIM

    def __init__(self, vectors: np.ndarray):
        self.vectors = {f"benchmark write {i}": v for i, v in enumerate(vectors)}

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


# ---- the server and the table ------------------------------------------------------------------------
def start_server(workdir: Path):
    import pgserver

    server = pgserver.get_server(workdir / "pg", cleanup_mode="stop")
    server.psql("SELECT 1 FROM pg_database WHERE datname = 'bench';").count("(1 row)") or server.psql(
        "CREATE DATABASE bench;")
    server.psql("\\c bench\nSET client_min_messages = warning;\nCREATE EXTENSION IF NOT EXISTS vector;")
    socket_dir = server.get_postmaster_info().socket_dir
    return server, f"postgresql+psycopg://postgres@/bench?host={socket_dir}"


def schema_url(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}%2Cpublic"


def build(url: str, size: int, stored, correct, usage, success, maintenance_work_mem: str) -> dict:
    """A fresh schema holding the bucket; reused when it already holds `size` rows (--keep)."""
    schema = f"pgvector_bench_{size}"
    engine = create_engine(url)
    with engine.begin() as conn:
        exists = conn.execute(text("SELECT 1 FROM information_schema.tables WHERE table_schema = :s "
                                   "AND table_name = 'memories'"), {"s": schema}).first()
        if exists and conn.execute(text(f"SELECT count(*) FROM {schema}.memories WHERE question NOT LIKE "
                                        "'benchmark write %'")).scalar_one() == size:
            return {"schema": schema, "reused": True}
        conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"))
    engine.dispose()
    bench_url = schema_url(url, schema)
    MemoryStore(bench_url).close()  # the migrations: tables, vector columns, indexes
    engine = create_engine(bench_url)
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    columns = ("id, namespace, question, caption, summary, plan, correct, question_type, modality, usage_count, "
               "success_count, pinned, provenance, question_embedding, caption_embedding, created_at, updated_at, "
               "question_vector")
    started = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(text(f"DROP INDEX {HNSW_INDEX}"))  # built once at the end: far faster than row by row
        cursor = conn.connection.driver_connection.cursor()
        with cursor.copy(f"COPY memories ({columns}) FROM STDIN") as copy:
            for i in range(size):
                copy.write_row((str(uuid.UUID(int=i + 1)), NAMESPACE, f"synthetic question {i}", None,
                                "Searched the local wiki, then cross-checked.", "1. search 2. verify",
                                bool(correct[i]), QUESTION_TYPES[i % len(QUESTION_TYPES)], "text", int(usage[i]),
                                int(success[i]), False, "{}", stored[i].tobytes(), None, now, now,
                                vector_literal(stored[i])))
    copy_s = time.perf_counter() - started
    started = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(text(f"SET maintenance_work_mem = '{maintenance_work_mem}'"))
        conn.execute(text(f"CREATE INDEX {HNSW_INDEX} ON memories USING hnsw (question_vector vector_ip_ops) "
                          f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"))
    index_s = time.perf_counter() - started
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE memories"))
        table_mb = conn.execute(text("SELECT pg_total_relation_size('memories')")).scalar_one() / 2**20
        index_mb = conn.execute(text(f"SELECT pg_relation_size('{HNSW_INDEX}')")).scalar_one() / 2**20
    engine.dispose()
    return {"schema": schema, "reused": False, "copy_rows_per_s": size / copy_s, "index_build_s": index_s,
            "table_mb": table_mb, "hnsw_mb": index_mb}


# ---- measuring one path ----------------------------------------------------------------------------
def settings_for(path: str) -> IndexSettings:
    return IndexSettings(database_search=path == "pgvector")




def search_all(store: MemoryStore, queries: np.ndarray, k: int) -> tuple[list[float], list[tuple[set, set]]]:
    latencies, found = [], []
    for query in queries:
        started = time.perf_counter()
        result = store.search_contrastive_vectors(query, namespace=NAMESPACE, k=k)
        latencies.append(time.perf_counter() - started)
        found.append(({s.memory.id for s in result.successful}, {s.memory.id for s in result.failed}))
    return latencies, found


def child(args) -> None:
    """One searching process of --processes: opens its own store, searches its share, prints JSON."""
    queries = np.load(args.queries_file)[args.child_index::args.processes]
    started = time.perf_counter()
    store = MemoryStore(args.child_url, index_settings=settings_for(args.child))
    store.search_contrastive_vectors(queries[0], namespace=NAMESPACE, k=args.k)
    cold = time.perf_counter() - started
    print("ready", flush=True)
    sys.stdin.readline()  # every process searches at once
    started = time.perf_counter()
    latencies, found = search_all(store, queries, args.k)
    wall = time.perf_counter() - started
    store.close()
    print(json.dumps({"cold_s": cold, "latencies": latencies, "wall_s": wall, "rss_mb": peak_rss_mb(),
                      "found": [[sorted(a), sorted(b)] for a, b in found],
                      "order": list(range(args.child_index, len(np.load(args.queries_file)), args.processes))}))


def measure(path: str, url: str, queries: np.ndarray, writes: np.ndarray, args) -> dict:
    """Searches in --processes fresh processes at once (so cold start and RSS are the path's own),
    then, here, a search after another store's write and this store's own writes."""
    queries_file = Path(args.workdir) / "queries.npy"
    np.save(queries_file, queries)
    command = [sys.executable, __file__, "--child", path, "--child-url", url, "--queries-file", str(queries_file),
               "--processes", str(args.processes), "--k", str(args.k)]
    children = [subprocess.Popen(command + ["--child-index", str(i)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for i in range(args.processes)]
    for process in children:
        if process.stdout.readline().strip() != "ready":
            raise SystemExit(f"a {path} searcher failed to start")
    for process in children:
        process.stdin.write("go\n")
        process.stdin.flush()
    reports = [json.loads(process.communicate()[0].strip().splitlines()[-1]) for process in children]
    latencies = [value for report in reports for value in report["latencies"]]
    found: list = [None] * len(queries)
    for report in reports:
        for position, (ok, bad) in zip(report["order"], report["found"]):
            found[position] = (set(ok), set(bad))
    result = {"cold_s": max(r["cold_s"] for r in reports), "rss_mb": max(r["rss_mb"] for r in reports),
              "qps": len(latencies) / max(r["wall_s"] for r in reports),
              "p50_ms": float(np.percentile(latencies, 50) * 1000),
              "p95_ms": float(np.percentile(latencies, 95) * 1000), "found": found}
    embedder = PrecomputedEmbedder(writes)
    store = MemoryStore(url, embedder=embedder, index_settings=settings_for(path))
    other = MemoryStore(url, embedder=embedder, index_settings=settings_for("pgvector"))
    try:
        store.search_contrastive_vectors(queries[0], namespace=NAMESPACE, k=args.k)
        offset = 0 if path == "in process" else WRITES
        other.add(NewMemory(f"benchmark write {offset}", "Benchmark write.", "1. search", True, namespace=NAMESPACE))
        started = time.perf_counter()
        store.search_contrastive_vectors(queries[1], namespace=NAMESPACE, k=args.k)
        result["after_write_ms"] = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        for i in range(offset + 1, offset + WRITES):
            store.add(NewMemory(f"benchmark write {i}", "Benchmark write.", "1. search", i % 3 != 0,
                                namespace=NAMESPACE))
        result["writes_per_s"] = (WRITES - 1) / (time.perf_counter() - started)
    finally:
        store.close()
        other.close()
    return result


def remove_writes(url: str) -> None:
    """The timed writes leave: the bucket is the N built memories again (for --keep)."""
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM memories WHERE namespace = :ns AND question LIKE 'benchmark write %'"),
                     {"ns": NAMESPACE})
        conn.execute(text("DELETE FROM memory_history WHERE namespace = :ns"), {"ns": NAMESPACE})
    engine.dispose()


def exact_reference(url: str, stored, correct, usage, success, queries, k: int) -> list[tuple[set, set]]:
    """The exact answer: every vector compared, scored by the store's own exact index."""
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT row_id, id FROM memories WHERE namespace = :ns ORDER BY row_id"),
                            {"ns": NAMESPACE}).all()
    engine.dispose()
    row_ids = np.array([r.row_id for r in rows[:len(stored)]], np.int64)
    names = {r.row_id: r.id for r in rows}
    bucket = BucketIndex(DIM, with_captions=False, settings=IndexSettings(approximate_threshold=10**12))
    bucket.add_many(row_ids, stored, None, correct, usage, success,
                    np.array([i % len(QUESTION_TYPES) for i in range(len(stored))], np.int8))
    answers = []
    for query in queries:
        ok, bad = bucket.search(query, None, k=k, offset=0, question_type=None)
        answers.append(({names[r.row_id] for r in ok}, {names[r.row_id] for r in bad}))
    return answers


def recall(found, wanted) -> float:
    hits = total = 0
    for (got_ok, got_bad), (want_ok, want_bad) in zip(found, wanted):
        hits += len(got_ok & want_ok) + len(got_bad & want_bad)
        total += len(want_ok) + len(want_bad)
    return hits / total if total else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="10k", help="memories in the bucket, e.g. 10k, 100k, 1M")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--processes", type=int, default=1, help="searching processes at once")
    parser.add_argument("--url", help="a PostgreSQL with pgvector (default: start one in --workdir)")
    parser.add_argument("--workdir", default="/tmp/mia-pgvector-bench")
    parser.add_argument("--keep", action="store_true", help="keep the built table (and the server's data)")
    parser.add_argument("--maintenance-work-mem", default="2GB", help="for the HNSW build (the graph should fit)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-url", help=argparse.SUPPRESS)
    parser.add_argument("--child-index", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--queries-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    size = parse_size(args.size)
    server = None
    url = args.url
    if url is None:
        server, url = start_server(Path(args.workdir))
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; N = {size:,}, "
          f"{args.queries} queries, k = {args.k}, {args.processes} searching process(es)", flush=True)
    stored, queries, writes, correct, usage, success = dataset(size, args.queries)
    built = build(url, size, stored, correct, usage, success, args.maintenance_work_mem)
    if built["reused"]:
        print(f"reusing the table in schema {built['schema']}", flush=True)
    else:
        print(f"built: COPY {built['copy_rows_per_s']:,.0f} rows/s, HNSW index (m={HNSW_M}, "
              f"ef_construction={HNSW_EF_CONSTRUCTION}) in {built['index_build_s']:.1f} s; table "
              f"{built['table_mb']:,.0f} MB of which HNSW {built['hnsw_mb']:,.0f} MB", flush=True)
    bench_url = schema_url(url, built["schema"])
    remove_writes(bench_url)
    wanted = exact_reference(bench_url, stored, correct, usage, success, queries, args.k)
    del stored
    results = {}
    for path in ("in process", "pgvector"):
        results[path] = measure(path, bench_url, queries, writes, args)
    remove_writes(bench_url)
    header = (f"| {'path':<10} | {'cold start s':>12} | {'p50 ms':>7} | {'p95 ms':>7} | {'q/s':>6} | "
              f"{'recall@' + str(args.k):>8} | {'after a write ms':>16} | {'writes/s':>8} | {'RSS MB':>7} |")
    print(header)
    print("|" + "|".join("-" * (len(cell) + 0) for cell in header.split("|")[1:-1]) + "|")
    for path, m in results.items():
        print(f"| {path:<10} | {m['cold_s']:>12.2f} | {m['p50_ms']:>7.2f} | {m['p95_ms']:>7.2f} | {m['qps']:>6.0f} | "
              f"{recall(m['found'], wanted):>8.3f} | {m['after_write_ms']:>16.1f} | {m['writes_per_s']:>8.0f} | "
              f"{m['rss_mb']:>7.0f} |", flush=True)
    if not args.keep:
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {built['schema']} CASCADE"))
        engine.dispose()
    if server is not None:
        server.cleanup()


if __name__ == "__main__":
    main()
