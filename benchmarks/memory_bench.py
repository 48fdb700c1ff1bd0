"""Memory store benchmark: retrieval latency, committed writes, cold start, RSS, file size, recall.

    .venv/bin/python benchmarks/memory_bench.py                 # 1k,10k,100k,1M
    .venv/bin/python benchmarks/memory_bench.py --sizes 1k,10k  # quick run

For every size N a fresh SQLite store is built and measured in its own process (so peak RSS
is that size's alone):

* 1k and 10k hold real all-MiniLM-L6-v2 embeddings of real HotpotQA texts (the questions, then
  sentences of their context paragraphs); queries are other HotpotQA texts.
* 100k and 1M hold random unit vectors drawn around 2,000 random centres (isotropic noise has
  no neighbours worth finding); queries are stored vectors plus noise.
* The N memories are bulk-inserted with SQLAlchemy executemany (no history rows); the measured
  writes then go through MemoryStore.add one committed transaction each.
* Query embedding is excluded everywhere (search_contrastive_vectors; writes use precomputed
  vectors), so the numbers are the store's own.
* "cpu p50" and "cpu w/s" use this process's CPU time, which other programs' load on the
  machine does not inflate; the wall-clock columns are what a user waits.
* "reference" re-implements the paper code's approach in the same process: every embedding in
  one in-RAM torch tensor, exact scoring, appends by concatenation, nothing persisted.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from memory_db import IndexSettings, MemoryStore, NewMemory, get_embedder  # noqa: E402
from memory_db.database import migrate, open_engine  # noqa: E402
from memory_db.records import QUESTION_TYPES  # noqa: E402
from memory_db.schema import memories  # noqa: E402
from memory_db.scoring import SIMILARITY_WEIGHT, WIN_RATE_WEIGHT  # noqa: E402

DIM = 384
NAMESPACE = "bench"
REAL_DATA_LIMIT = 10_000
HOTPOTQA = REPO_ROOT / "data" / "hotpotqa"
TARGETS = "targets: p50 <= 10 ms @100k, <= 50 ms @1M; >= 500 writes/s; cold start @1M <= 30 s; " \
          "peak RSS @1M <= 3 GB; recall@4 >= 0.95"


def parse_size(text: str) -> int:
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("km")) * scale)


# ---- data -------------------------------------------------------------------------------------
def hotpotqa_texts() -> list[str]:
    questions, sentences = [], []
    for split in ("dev", "train"):
        with open(HOTPOTQA / f"{split}.jsonl", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                questions.append(record["question"])
                for paragraph in record["context"]["sentences"]:
                    sentences.extend(s.strip() for s in paragraph if len(s.strip()) > 20)
    seen, texts = set(), []
    for text in questions + sentences:
        if text not in seen:
            seen.add(text)
            texts.append(text)
    return texts


def real_vectors(workdir: Path, count: int) -> tuple[list[str], np.ndarray]:
    texts = hotpotqa_texts()[:count]
    cache = workdir / f"hotpotqa_minilm_{len(texts)}.npy"
    if cache.exists():
        return texts, np.load(cache)
    vectors = get_embedder().encode(texts)
    np.save(cache, vectors)
    return texts, vectors


def clustered_unit_vectors(count: int, seed: int, centres: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((count, DIM), np.float32)
    for start in range(0, count, 100_000):
        size = min(100_000, count - start)
        block = centres[rng.integers(0, len(centres), size)] + 0.6 * rng.standard_normal((size, DIM), np.float32)
        out[start:start + size] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def dataset(workdir: Path, size: int, n_queries: int, n_writes: int):
    """Stored vectors, query vectors, vectors for the timed writes."""
    if size + n_queries + n_writes <= REAL_DATA_LIMIT + 1_000:
        texts, vectors = real_vectors(workdir, size + n_queries + n_writes)
        if len(texts) == size + n_queries + n_writes:
            return ("hotpotqa", texts[:size], vectors[:size], vectors[size:size + n_queries],
                    texts[size + n_queries:], vectors[size + n_queries:])
    centres = np.random.default_rng(0).standard_normal((2_000, DIM)).astype(np.float32)
    stored = clustered_unit_vectors(size, 1, centres)
    rng = np.random.default_rng(2)
    picks = stored[rng.integers(0, size, n_queries)] + 0.05 * rng.standard_normal((n_queries, DIM), np.float32)
    queries = picks / np.linalg.norm(picks, axis=1, keepdims=True)
    writes = clustered_unit_vectors(n_writes, 3, centres)
    return ("random", None, stored, queries, [f"benchmark write {i}" for i in range(n_writes)], writes)


def labels_and_counts(size: int):
    rng = np.random.default_rng(7)
    correct = rng.random(size) < 0.6
    usage = rng.integers(1, 11, size)
    success = rng.integers(0, usage + 1)
    return correct, usage, success


# ---- building --------------------------------------------------------------------------------
def bulk_build(url: str, texts: list[str] | None, vectors: np.ndarray) -> float:
    engine = open_engine(url)
    migrate(engine)
    correct, usage, success = labels_and_counts(len(vectors))
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    start = time.perf_counter()
    for begin in range(0, len(vectors), 20_000):
        rows = [dict(id=str(uuid.uuid4()), namespace=NAMESPACE,
                     question=texts[i] if texts else f"synthetic question {i}", caption=None,
                     summary="Searched the local wiki, then cross-checked.", plan="1. search 2. verify",
                     correct=bool(correct[i]), question_type=QUESTION_TYPES[i % len(QUESTION_TYPES)],
                     modality="text", usage_count=int(usage[i]), success_count=int(success[i]), provenance={},
                     question_embedding=vectors[i].tobytes(), caption_embedding=None, created_at=now,
                     updated_at=now)
                for i in range(begin, min(begin + 20_000, len(vectors)))]
        with engine.begin() as conn:
            conn.execute(memories.insert(), rows)
    elapsed = time.perf_counter() - start
    engine.dispose()
    return len(vectors) / elapsed


class PrecomputedEmbedder:
    """Hands out vectors computed beforehand, so timed writes exclude embedding."""

    dim = DIM

    def __init__(self, texts: list[str], vectors: np.ndarray):
        self._vectors = dict(zip(texts, vectors))

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vectors[t] for t in texts])


# ---- the reference approach --------------------------------------------------------------------
class InRamReference:
    """All embeddings in one tensor, exact MIA scoring, appends by torch.cat, nothing persisted."""

    def __init__(self, vectors: np.ndarray, correct, usage, success):
        import torch

        self.torch = torch
        torch.set_num_threads(1)  # on a busy 2-core machine two spinning threads are far slower
        self.embeddings = torch.from_numpy(np.ascontiguousarray(vectors)).clone()
        self.correct = torch.from_numpy(correct.copy())
        self.usage = torch.from_numpy(usage.astype(np.float32))
        self.success = torch.from_numpy(success.astype(np.float32))

    def search(self, query: np.ndarray, k: int) -> tuple[list[int], list[int]]:
        torch = self.torch
        sims = self.embeddings @ torch.from_numpy(query)
        low, high = sims.min(), sims.max()
        norm = (sims - low) / (high - low) if high > low else torch.ones_like(sims)
        scores = SIMILARITY_WEIGHT * norm + WIN_RATE_WEIGHT * self.success / self.usage
        out = []
        for label in (True, False):
            candidates = torch.nonzero(self.correct == label).flatten()
            top = torch.topk(scores[candidates], min(k, len(candidates))).indices
            out.append(candidates[top].tolist())
        return out[0], out[1]

    def add(self, vector: np.ndarray, correct: bool) -> None:
        torch = self.torch
        self.embeddings = torch.cat([self.embeddings, torch.from_numpy(vector).reshape(1, -1)])
        self.correct = torch.cat([self.correct, torch.tensor([correct])])
        self.usage = torch.cat([self.usage, torch.tensor([1.0])])
        self.success = torch.cat([self.success, torch.tensor([1.0])])


def percentile_ms(samples: list[float], q: float) -> float:
    return float(np.percentile(np.array(samples) * 1000, q))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---- one size, in its own process ----------------------------------------------------------------
def build_size(args) -> None:
    workdir = Path(args.workdir)
    db = workdir / f"bench_{args.child}.db"
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        path.unlink(missing_ok=True)
    source, texts, stored, queries, write_texts, write_vectors = dataset(workdir, args.child, args.queries, args.writes)
    rate = bulk_build(f"sqlite:///{db}", texts, stored)
    np.save(workdir / f"bench_{args.child}_stored.npy", stored)
    np.save(workdir / f"bench_{args.child}_queries.npy", queries)
    np.save(workdir / f"bench_{args.child}_writes.npy", write_vectors)
    (workdir / f"bench_{args.child}_write_texts.json").write_text(json.dumps(write_texts))
    print(json.dumps({"source": source, "bulk_rows_per_s": rate}))


def measure_size(args) -> None:
    size, k, workdir = args.child, args.k, Path(args.workdir)
    db = workdir / f"bench_{size}.db"
    queries = np.load(workdir / f"bench_{size}_queries.npy")
    write_vectors = np.load(workdir / f"bench_{size}_writes.npy")
    write_texts = json.loads((workdir / f"bench_{size}_write_texts.json").read_text())
    embedder = PrecomputedEmbedder(write_texts, write_vectors)
    settings = IndexSettings(approximate_threshold=args.approximate_threshold, n_probe=args.n_probe)

    start = time.perf_counter()
    store = MemoryStore(f"sqlite:///{db}", embedder=embedder, merge_threshold=0.95, index_settings=settings)
    first = store.search_contrastive_vectors(queries[0], namespace=NAMESPACE, k=k)
    cold_start = time.perf_counter() - start
    assert first.successful, "the store returned nothing"
    approximate = store._indexes[NAMESPACE].buckets["text"].ann is not None

    latencies, cpu_latencies, ours = [], [], []
    for query in queries:
        started, cpu_started = time.perf_counter(), time.thread_time()
        result = store.search_contrastive_vectors(query, namespace=NAMESPACE, k=k)
        latencies.append(time.perf_counter() - started)
        cpu_latencies.append(time.thread_time() - cpu_started)
        ours.append(({s.memory.question for s in result.successful}, {s.memory.question for s in result.failed}))
    rss_store = peak_rss_mb()
    file_mb = sum(p.stat().st_size for p in workdir.glob(f"bench_{size}.db*")) / 2**20

    # exact reference on the same data: latency, and the ground truth for recall
    stored = np.load(workdir / f"bench_{size}_stored.npy", mmap_mode="r")
    correct, usage, success = labels_and_counts(size)
    started = time.perf_counter()
    reference = InRamReference(np.asarray(stored), correct, usage, success)
    reference_start = time.perf_counter() - started
    names = _names(store, size)
    reference_latencies, found, total = [], 0, 0
    for query, (got_ok, got_bad) in zip(queries, ours):
        started = time.perf_counter()
        want_ok, want_bad = reference.search(query, k)
        reference_latencies.append(time.perf_counter() - started)
        for want, got in ((want_ok, got_ok), (want_bad, got_bad)):
            found += len({names[i] for i in want} & got)
            total += len(want)

    started, cpu_started, written = time.perf_counter(), time.process_time(), 0
    for text in write_texts:
        store.add(NewMemory(text, "Benchmark write: searched, then verified.", "1. search", written % 3 != 0,
                            namespace=NAMESPACE))
        written += 1
    write_rate = written / (time.perf_counter() - started)
    cpu_write_rate = written / (time.process_time() - cpu_started)
    store.close()

    started, reference_written = time.perf_counter(), 0
    for vector in write_vectors:
        reference.add(vector, reference_written % 3 != 0)
        reference_written += 1
        if time.perf_counter() - started > 20:
            break
    reference_write_rate = reference_written / (time.perf_counter() - started)

    print(json.dumps({
        "approximate": approximate, "cold_start_s": cold_start, "p50_ms": percentile_ms(latencies, 50),
        "p95_ms": percentile_ms(latencies, 95), "cpu_p50_ms": percentile_ms(cpu_latencies, 50),
        "writes_per_s": write_rate, "cpu_writes_per_s": cpu_write_rate, "peak_rss_mb": rss_store,
        "file_mb": file_mb, "recall": found / total if total else 1.0,
        "ref_start_s": reference_start, "ref_p50_ms": percentile_ms(reference_latencies, 50),
        "ref_p95_ms": percentile_ms(reference_latencies, 95), "ref_writes_per_s": reference_write_rate,
        "ref_peak_rss_mb": peak_rss_mb(),
    }))


def _names(store: MemoryStore, size: int) -> list[str]:
    """Question text of each stored position (row order = insertion order)."""
    from sqlalchemy import select

    with store._engine.connect() as conn:
        return list(conn.execute(select(memories.c.question).where(memories.c.namespace == NAMESPACE)
                                 .order_by(memories.c.row_id).limit(size)).scalars())


# ---- driver -----------------------------------------------------------------------------------------
def run_child(mode: str, size: int, args) -> dict:
    command = [sys.executable, __file__, f"--{mode}", str(size), "--workdir", args.workdir,
               "--queries", str(args.queries), "--writes", str(args.writes), "--k", str(args.k),
               "--approximate-threshold", str(args.approximate_threshold), "--n-probe", str(args.n_probe)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{mode} for N={size} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1k,10k,100k,1M", help="comma-separated, e.g. 1k,10k")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--writes", type=int, default=500)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--approximate-threshold", type=int, default=IndexSettings().approximate_threshold)
    parser.add_argument("--n-probe", type=int, default=IndexSettings().n_probe)
    parser.add_argument("--workdir", default="/tmp/mia-memory-bench")
    parser.add_argument("--keep", action="store_true", help="keep the built databases")
    parser.add_argument("--build", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    if args.build:
        args.child = args.build
        return build_size(args)
    if args.measure:
        args.child = args.measure
        return measure_size(args)

    header = (f"{'N':>9} {'data':>8} {'index':>7} {'p50 ms':>7} {'p95 ms':>7} {'cpu p50':>7} {'writes/s':>9} "
              f"{'cpu w/s':>8} {'cold s':>7} "
              f"{'RSS MB':>7} {'file MB':>8} {'recall@' + str(args.k):>9} | {'ref p50':>8} {'ref p95':>8} "
              f"{'ref w/s':>8} {'ref RSS':>8} {'p50 ref/ours':>12}")
    print(TARGETS)
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          "(cpu columns: this process's CPU time, robust to other load)")
    print(header)
    print("-" * len(header))
    for size in (parse_size(s) for s in args.sizes.split(",")):
        built = run_child("build", size, args)
        m = run_child("measure", size, args)
        print(f"{size:>9,} {built['source']:>8} {'ivf' if m['approximate'] else 'exact':>7} {m['p50_ms']:>7.2f} "
              f"{m['p95_ms']:>7.2f} {m['cpu_p50_ms']:>7.2f} {m['writes_per_s']:>9.0f} {m['cpu_writes_per_s']:>8.0f} "
              f"{m['cold_start_s']:>7.2f} {m['peak_rss_mb']:>7.0f} "
              f"{m['file_mb']:>8.1f} {m['recall']:>9.3f} | {m['ref_p50_ms']:>8.2f} {m['ref_p95_ms']:>8.2f} "
              f"{m['ref_writes_per_s']:>8.0f} {m['ref_peak_rss_mb']:>8.0f} {m['ref_p50_ms'] / m['p50_ms']:>12.2f}",
              flush=True)
        print(f"{'':>9} (bulk insert {built['bulk_rows_per_s']:,.0f} rows/s; reference built its tensor in "
              f"{m['ref_start_s']:.2f} s)", flush=True)
        if not args.keep:
            for path in Path(args.workdir).glob(f"bench_{size}[._]*"):
                path.unlink()


if __name__ == "__main__":
    main()
