"""Your own documents at scale: indexing time for N generated PDF pages, and search latency at P passages.

Usage (the targets: 1,000 PDF pages indexed in under 10 minutes; search under 100 ms p50 at 100,000 passages):

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/documents_bench.py --pages 1000 --passages 100000

1. Indexing: `--pages` pages of text (sandbox-wiki paragraphs, about 2,000 characters a page) are
   written as PDFs of 50 pages with fpdf2, then added to a fresh document store on the real MiniLM
   embedder, as the Documents view and `python -m app index` add them. Parsing (pypdf) is timed
   alone first; "embed and store" is the rest of the add.
2. Search: `--passages` passages (each a mix of sentences from random sandbox-wiki paragraphs, under
   a heading of its own) are added as Markdown files, then `--queries` HotpotQA train questions are
   searched one at a time: the document index alone (BM25 + dense, fused) and the whole `search`
   tool (the wiki's BM25 index and the documents, fused; the wiki passages' similarity to the query
   is embedded per call). The passages' vectors are random unit vectors unless `--real-vectors`
   (embedding 100,000 passages with MiniLM takes tens of minutes on 2 cores, and the search does
   the same work whatever the vectors hold); the queries are always embedded by the real MiniLM.
   The index build (loading every passage, BM25 over them, the vector matrix) is timed as the
   first search.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from backend.documents import DocumentStore  # noqa: E402
from backend.documents.parsing import parse_file  # noqa: E402
from backend.documents.passages import split_passages  # noqa: E402
from backend.tools.corpus import CorpusFiles, load_documents  # noqa: E402
from backend.tools.text_ranking import split_sentences  # noqa: E402

PAGES_PER_PDF = 50
CHARS_PER_PAGE = 2000
PASSAGES_PER_FILE = 1000
REPO = Path(__file__).resolve().parents[1]


class RandomIndexVectors:
    """MiniLM for queries (a handful of texts per call) and random unit vectors for indexing batches."""

    def __init__(self, embedder, seed: int = 0) -> None:
        import numpy as np

        self.inner = embedder
        self.random = np.random.default_rng(seed)

    def encode(self, texts):
        import numpy as np

        if len(texts) <= 8:
            return self.inner.encode(texts)
        vectors = self.random.standard_normal((len(texts), 384)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def latin1(text: str) -> str:
    return text.encode("latin-1", "replace").decode("latin-1")


def write_pdfs(folder: Path, pages: int, paragraphs: list[str], rng: random.Random) -> list[Path]:
    from fpdf import FPDF

    paths = []
    for start in range(0, pages, PAGES_PER_PDF):
        pdf = FPDF()
        pdf.set_auto_page_break(False)
        pdf.set_font("Helvetica", size=10)
        for _ in range(min(PAGES_PER_PDF, pages - start)):
            text = ""
            while len(text) < CHARS_PER_PAGE:
                text += rng.choice(paragraphs) + "\n\n"
            pdf.add_page()
            pdf.multi_cell(0, 4.5, latin1(text[:CHARS_PER_PAGE + 400]))
        path = folder / f"report-{start // PAGES_PER_PDF + 1:03d}.pdf"
        pdf.output(str(path))
        paths.append(path)
    return paths


def write_markdown(folder: Path, passages: int, sentences: list[str], rng: random.Random) -> list[Path]:
    paths = []
    for start in range(0, passages, PASSAGES_PER_FILE):
        lines = []
        for number in range(start, min(passages, start + PASSAGES_PER_FILE)):
            body = ""
            while len(body) < 420:
                body += rng.choice(sentences) + " "
            lines.append(f"## Note {number}\n\n{body.strip()}\n")
        path = folder / f"notes-{start // PASSAGES_PER_FILE + 1:04d}.md"
        path.write_text("\n".join(lines), encoding="utf-8")
        paths.append(path)
    return paths


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000, help="PDF pages to index (part 1; 0 skips it)")
    parser.add_argument("--passages", type=int, default=100_000, help="passages to search (part 2; 0 skips it)")
    parser.add_argument("--queries", type=int, default=200, help="questions searched in part 2")
    parser.add_argument("--real-vectors", action="store_true", help="embed part 2's passages with MiniLM too")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", type=Path, help="where to write the files and stores (default: a temporary folder)")
    args = parser.parse_args()

    from memory_db import get_embedder

    rng = random.Random(args.seed)
    corpus = load_documents(CorpusFiles.default())
    paragraphs = [document.text for document in corpus]
    sentences = [s for text in paragraphs for s in split_sentences(text) if 40 <= len(s) <= 300]
    embedder = get_embedder()
    embedder.encode(["warm up"])
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="documents-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, str]] = [("machine", f"{os.cpu_count()} cores")]

    if args.pages:
        folder = work / "pdfs"
        folder.mkdir(exist_ok=True)
        started = time.perf_counter()
        pdfs = write_pdfs(folder, args.pages, paragraphs, rng)
        rows.append(("PDFs written (not counted)", f"{len(pdfs)} files, {args.pages} pages, "
                                                    f"{time.perf_counter() - started:.1f} s"))
        started = time.perf_counter()
        passages = sum(len(split_passages(parse_file(path))) for path in pdfs)
        parse_s = time.perf_counter() - started
        store = DocumentStore(work / "store-pdf", embedder=embedder)
        started = time.perf_counter()
        report = store.add_paths("bench", "pdfs", [folder])
        add_s = time.perf_counter() - started
        assert not report.failed, report.failed
        per_page = add_s / args.pages
        rows += [
            ("indexing: pages", f"{args.pages} ({passages} passages)"),
            ("indexing: parse (pypdf) + split", f"{parse_s:.1f} s ({1000 * parse_s / args.pages:.0f} ms/page)"),
            ("indexing: whole add (parse, embed, store)", f"{add_s:.1f} s ({args.pages / add_s:.1f} pages/s)"),
            ("indexing: 1,000 pages at this rate", f"{1000 * per_page / 60:.1f} min (target < 10 min)"),
        ]

    if args.passages:
        folder = work / "markdown"
        folder.mkdir(exist_ok=True)
        files = write_markdown(folder, args.passages, sentences, rng)
        indexing_embedder = embedder if args.real_vectors else RandomIndexVectors(embedder, args.seed)
        store = DocumentStore(work / "store-search", embedder=indexing_embedder)
        started = time.perf_counter()
        report = store.add_paths("bench", "notes", [folder])
        add_s = time.perf_counter() - started
        assert not report.failed, report.failed
        count = sum(info.passages for info in report.indexed)
        started = time.perf_counter()
        index = store.index_for("bench")
        build_s = time.perf_counter() - started
        questions = [json.loads(line)["question"] for line in
                     (REPO / "data" / "hotpotqa" / "train.jsonl").read_text(encoding="utf-8").splitlines()[: args.queries]
                     if line.strip()]
        timings = []
        for question in questions:
            started = time.perf_counter()
            store.search("bench", [question], 3)
            timings.append(1000 * (time.perf_counter() - started))

        from backend.config import load_config
        from backend.tools.search import WikiSearchTool
        from backend.tools.wiki_index import WikiIndex

        wiki = WikiIndex.load_or_build(load_config().index_cache_dir, progress=False)
        tool = WikiSearchTool(wiki, store).for_namespace("bench")
        tool_timings = []
        for question in questions:
            started = time.perf_counter()
            result = tool({"query_list": [question]})
            tool_timings.append(1000 * (time.perf_counter() - started))
            assert result.ok, result.error
        vectors = "MiniLM" if args.real_vectors else "random (queries: MiniLM)"
        rows += [
            ("search: passages", f"{count:,} in {len(files)} Markdown files (vectors: {vectors})"),
            ("search: adding them", f"{add_s:.1f} s"),
            ("search: index build (first search)", f"{build_s:.1f} s ({len(index):,} passages in memory)"),
            ("search: documents alone, p50 / p95", f"{statistics.median(timings):.1f} / {percentile(timings, 0.95):.1f} ms "
                                                   f"({len(timings)} questions, 1 query each, k=3)"),
            ("search: `search` tool (wiki + documents), p50 / p95",
             f"{statistics.median(tool_timings):.1f} / {percentile(tool_timings, 0.95):.1f} ms (target p50 < 100 ms)"),
        ]

    width = max(len(name) for name, _ in rows)
    print(f"| {'measure'.ljust(width)} | value |")
    print(f"|{'-' * (width + 2)}|-------|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")


if __name__ == "__main__":
    main()
