"""Does one user's hostile document slow another user's questions? The other user's request latency
(p50/p95) idle, and while a hostile document is read over and over: in the reading child process
under its budget (how the app reads documents), and in the app's own process as it used to.

Usage (the goal: p50 and p95 within 20% of idle while the child reads):

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/hostile_documents_bench.py --rounds 3 --requests 60

- The request: bob's `search` tool call (the sandbox wiki's BM25 index and bob's own documents,
  fused; MiniLM embeds the query), one HotpotQA train question at a time, as an Executor turn makes it.
- The hostile documents, each within the default budget so that it is read to its end (or to the
  passage limit), then read again with new bytes until the phase's requests are done:
  a PDF of `--ocr-pages` blank picture pages (one tesseract call a page, every call finding nothing),
  and a DOCX of `--docx-paragraphs` short paragraphs (refused at the passage limit after parsing).
  Each loaded block of requests is compared with the idle block just before it.
- "child": DocumentStore.add_files, as the Documents view adds (backend.documents.parse_process:
  a niced child process). "in-process": parse_file and split_passages in a thread of this process,
  as every document was read before the budget.
- For comparison, an ordinary DOCX of `--fair-paragraphs` paragraphs added the same way: its
  passages are embedded by MiniLM in this process (the app's), beside bob's queries.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from backend.config import DocumentsConfig, load_config  # noqa: E402
from backend.documents import DocumentError, DocumentStore  # noqa: E402
from backend.documents.parsing import parse_file  # noqa: E402
from backend.documents.passages import split_passages  # noqa: E402
from backend.tools.corpus import CorpusFiles, load_documents  # noqa: E402
from tests.backend.documents.crafted_files import write_blank_image_pdf, write_long_docx  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


class HostileReads:
    """Reads a hostile file over and over in a thread until stopped; each round's bytes differ (a
    comment after the PDF's end, a zip comment), so that nothing is reused from a previous round."""

    def __init__(self, source: Path, folder: Path, read: Callable[[Path], str]) -> None:
        self.source, self.folder, self.read = source, folder, read
        self.stop = threading.Event()
        self.outcomes: list[str] = []
        self.seconds: list[float] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _copy(self, number: int) -> Path:
        data = self.source.read_bytes()
        target = self.folder / f"round-{number}{self.source.suffix}"
        if self.source.suffix == ".pdf":
            target.write_bytes(data + f"\n% round {number}\n".encode())
        else:
            import zipfile

            target.write_bytes(data)
            with zipfile.ZipFile(target, "a") as archive:
                archive.comment = f"round {number}".encode()
        return target

    def _run(self) -> None:
        number = 0
        while not self.stop.is_set():
            number += 1
            path = self._copy(number)
            started = time.perf_counter()
            self.outcomes.append(self.read(path))
            self.seconds.append(time.perf_counter() - started)

    def __enter__(self) -> HostileReads:
        self.thread.start()
        return self

    def __exit__(self, *_) -> None:
        self.stop.set()
        self.thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60, help="bob's requests per block")
    parser.add_argument("--rounds", type=int, default=3, help="rounds through the loads, each load after an idle block")
    parser.add_argument("--ocr-pages", type=int, default=40, help="blank picture pages of the hostile PDF")
    parser.add_argument("--docx-paragraphs", type=int, default=120_000, help="paragraphs of the hostile DOCX")
    parser.add_argument("--fair-paragraphs", type=int, default=2000, help="paragraphs of the ordinary DOCX")
    parser.add_argument("--work-dir", type=Path, help="where to write the files and stores (default: a temporary folder)")
    args = parser.parse_args()

    from memory_db import get_embedder
    from backend.documents import ocr
    from backend.tools.search import WikiSearchTool
    from backend.tools.wiki_index import WikiIndex

    if not ocr.ocr_available():
        sys.exit("tesseract is not installed: the hostile PDF would not be read (apt-get install tesseract-ocr)")
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="hostile-documents-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    embedder = get_embedder()
    embedder.encode(["warm up"])
    budget = replace(DocumentsConfig(), max_ocr_calls=max(args.ocr_pages, DocumentsConfig().max_ocr_calls))
    store = DocumentStore(work / "documents", embedder=embedder, budget=budget)

    notes = work / "bob-notes.md"
    corpus = load_documents(CorpusFiles.default())
    notes.write_text("\n\n".join(f"## {d.title}\n\n{d.text}" for d in corpus[:200]), encoding="utf-8")
    assert not store.add_paths("bob", "notes", [notes]).failed
    tool = WikiSearchTool(WikiIndex.load_or_build(load_config().index_cache_dir, progress=False), store).for_namespace("bob")
    questions = [json.loads(line)["question"] for line in
                 (REPO / "data" / "hotpotqa" / "train.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]

    def bob_requests() -> list[float]:
        timings = []
        for question in questions[: args.requests]:
            started = time.perf_counter()
            result = tool({"query_list": [question]})
            timings.append(1000 * (time.perf_counter() - started))
            assert result.ok, result.error
        return timings

    def in_child(path: Path) -> str:
        report = store.add_files("alice", "hostile", [(path, path.name)])
        if not report.failed:
            return "read"
        why = report.failed[0][1]
        return f"refused ({why[why.index('(documents.') + 1:why.index(' in mia.toml')]})" if "(documents." in why else why

    def in_process(path: Path) -> str:
        try:
            split_passages(parse_file(path, budget=replace(budget, max_passages=10**9)))
        except DocumentError as exc:
            return f"failed: {exc}"
        return "read"

    pdf = write_blank_image_pdf(work / "blank.pdf", args.ocr_pages, size=(1240, 1754))  # A4 at 150 dpi
    docx = write_long_docx(work / "long.docx", args.docx_paragraphs)
    fair = write_long_docx(work / "fair.docx", args.fair_paragraphs)
    in_child(write_blank_image_pdf(work / "warm.pdf", 1))  # starts the reading processes' server
    bob_requests()  # warms the wiki index and the query embedder

    loads = [(f"PDF, {args.ocr_pages} blank pages by OCR", pdf, "child"),
             (f"PDF, {args.ocr_pages} blank pages by OCR", pdf, "in-process"),
             (f"DOCX, {args.docx_paragraphs:,} paragraphs", docx, "child"),
             (f"DOCX, {args.docx_paragraphs:,} paragraphs", docx, "in-process"),
             (f"ordinary DOCX, {args.fair_paragraphs:,} paragraphs", fair, "child")]
    # Other engineers' jobs come and go on a shared machine: each loaded block is compared with an
    # idle block measured just before it, and the rounds take turns through the loads.
    idle: dict[int, list[float]] = {number: [] for number in range(len(loads))}
    loaded: dict[int, list[float]] = {number: [] for number in range(len(loads))}
    reads: dict[int, list[HostileReads]] = {number: [] for number in range(len(loads))}
    for round_number in range(args.rounds):
        for number, (_, source, how) in enumerate(loads):
            idle[number] += bob_requests()
            folder = work / f"round-{round_number}-load-{number}"
            folder.mkdir()
            with HostileReads(source, folder, in_child if how == "child" else in_process) as hostile:
                loaded[number] += bob_requests()
            reads[number].append(hostile)

    load_average = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load_average[0]:.2f} / {load_average[1]:.2f} / "
          f"{load_average[2]:.2f} (1 / 5 / 15 min) at the end; {args.rounds} rounds of {args.requests} requests "
          "idle, then as many under each load")
    print("| hostile document | read | requests | idle p50 / p95 ms | loaded p50 / p95 ms | p50 change | p95 change "
          "| hostile reads (median s, outcome) |")
    print("|---|---|---|---|---|---|---|---|")
    for number, (load, _, how) in enumerate(loads):
        calm, busy = idle[number], loaded[number]
        seconds = [second for hostile in reads[number] for second in hostile.seconds]
        outcome = reads[number][0].outcomes[0]
        print(f"| {load} | {how} | {len(busy)} | {statistics.median(calm):.0f} / {percentile(calm, 0.95):.0f} | "
              f"{statistics.median(busy):.0f} / {percentile(busy, 0.95):.0f} | "
              f"{statistics.median(busy) / statistics.median(calm) - 1:+.0%} | "
              f"{percentile(busy, 0.95) / percentile(calm, 0.95) - 1:+.0%} | "
              f"{len(seconds)} ({statistics.median(seconds):.1f} s; {outcome}) |")

if __name__ == "__main__":
    main()
