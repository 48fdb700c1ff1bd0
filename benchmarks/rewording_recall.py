"""How well a person's answer is recalled for a reworded question, and how rarely for a near-miss.

For each (original, rewording) pair of benchmarks/rewordings/<split>.jsonl, and each (original,
near-miss) pair of <split>_near_misses.jsonl (a different question about the same things), it checks
the test `backend.taught.recall` applies: MiniLM cosine >= the threshold and `is_rewording`. A
rewording should be recalled, a near-miss never. Prints one row per threshold.

    .venv/bin/python benchmarks/rewording_recall.py --split train
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.taught import is_rewording  # noqa: E402
from memory_db import get_embedder  # noqa: E402

HERE = Path(__file__).resolve().parent / "rewordings"


def pairs(path: Path) -> list[tuple[str, str]]:
    if not path.is_file():
        return []
    return [(r["original"], r["question"]) for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())]


def cosines(embedder, pairs_: list[tuple[str, str]]) -> np.ndarray:
    if not pairs_:
        return np.zeros(0)
    vectors = np.asarray(embedder.encode([text for pair in pairs_ for text in pair]), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.einsum("ij,ij->i", vectors[0::2], vectors[1::2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="train", choices=("train", "dev"))
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.8, 0.85, 0.88, 0.9, 0.95])
    args = parser.parse_args()
    embedder = get_embedder()
    rewordings = pairs(HERE / f"{args.split}.jsonl")
    near = pairs(HERE / f"{args.split}_near_misses.jsonl")
    sims_r, sims_n = cosines(embedder, rewordings), cosines(embedder, near)
    words_r = [is_rewording(a, b) for a, b in rewordings]
    words_n = [is_rewording(a, b) for a, b in near]
    print(f"split {args.split}: {len(rewordings)} rewordings, {len(near)} near-misses; "
          f"words test passes {sum(words_r)}/{len(rewordings)} rewordings, {sum(words_n)}/{len(near)} near-misses")
    print("| threshold | rewordings recalled | near-misses recalled |")
    print("|---|---|---|")
    for t in args.thresholds:
        hit = sum(s >= t and w for s, w in zip(sims_r, words_r))
        false = sum(s >= t and w for s, w in zip(sims_n, words_n))
        print(f"| {t:.2f} | {hit}/{len(rewordings)} | {false}/{len(near)} |")


if __name__ == "__main__":
    main()
