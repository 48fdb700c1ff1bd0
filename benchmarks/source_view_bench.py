"""How long opening a cited source beside the answer takes on the server (app/source_view.py), per
kind: a wiki passage (text, sentence highlighted), a passage of a Markdown document (the store's
passages at its place) and a page of a PDF (rendered by PDFium in a capped child process, the
sentence's boxes marked). Targets: 1 s, 1 s and 3 s. Prints a table of p50 / p95 / max over N opens.

    nice -n 19 .venv/bin/python benchmarks/source_view_bench.py --n 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# The app's modules are imported in the functions: a render's child process (forkserver) imports this
# script again, and should not pay for the app (run as `python -m app`, the app's children do not).

PDF_SENTENCE = ("The Quillmoor reactor opened in 1987 after a decade of construction, and its sentence runs on "
                "across the line break so that the mark needs two boxes on the page.")
FILLER = "Annual survey of northern power stations, with their output, staff and the coal they burnt. " * 12


def write_pdf(path: Path, pages: int = 12) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for number in range(1, pages + 1):
        pdf.add_page()
        pdf.multi_cell(0, 6, FILLER + (PDF_SENTENCE + " " if number == 7 else "") + FILLER)
    pdf.output(str(path))


def run_of(namespace: str, passage: dict, sentence: str) -> list:
    from backend.events import AnswerReady, RunFinished, RunStarted, ToolReturned

    citation = {"n": 1, "title": passage["title"], "url": passage.get("url"), "source": passage["source"],
                "sentence": sentence}
    return [RunStarted("bench", question="When did the Quillmoor reactor open?", namespace=namespace),
            ToolReturned("bench", turn=1, name="search", ok=True, content="...", passages=[passage]),
            AnswerReady("bench", text="1987", sources=[citation]), RunFinished("bench", answer="1987", stats={})]


def timed(ctx, namespace: str, events: list, n: int, check: str) -> list[float]:
    from app.render_html import transcript_of
    from app.source_view import open_citation

    transcript = transcript_of(events)
    seconds = []
    for _ in range(n):
        started = time.perf_counter()
        view = open_citation(ctx, namespace, namespace, transcript, 1)
        seconds.append(time.perf_counter() - started)
        assert check in view.html, f"the opened source lacks {check!r}"
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="opens per kind")
    args = parser.parse_args()
    from app.user_files import UserFiles
    from backend.config import load_config
    from backend.documents import DocumentStore
    from memory_db import get_embedder

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        store = DocumentStore(root / "documents", embedder=get_embedder())
        write_pdf(root / "survey.pdf")
        (root / "notes.md").write_text("# Reactors\n\n" + FILLER + "\n\nThe Quillmoor reactor opened in 1987.\n",
                                       encoding="utf-8")
        store.add_paths("bench", "survey", [root / "survey.pdf", root / "notes.md"])
        ctx = SimpleNamespace(runtime=SimpleNamespace(documents=store, config=load_config(environ={})),
                              files=UserFiles())
        pdf_hit = next(p for p, _ in store.search("bench", ["Quillmoor reactor opened 1987 decade"], k=5)[0]
                       if p.url.endswith("#page=7"))
        md_hit = next(p for p, _ in store.search("bench", ["Quillmoor reactor opened in 1987"], k=5)[0]
                      if p.title.startswith("notes.md"))
        as_dict = lambda p: {"title": p.title, "text": p.text, "source": p.source, "score": 1.0, "url": p.url}  # noqa: E731
        wiki = {"title": "Quillmoor reactor", "source": "wiki:hotpotqa", "score": 1.0, "url": None,
                "text": FILLER + " The Quillmoor reactor opened in 1987. " + FILLER}
        rows = [
            ("wiki passage (text)", 1.0, timed(ctx, "bench", run_of("bench", wiki, "The Quillmoor reactor opened in 1987."),
                                              args.n, "cited-sentence")),
            ("Markdown document passage", 1.0, timed(ctx, "bench", run_of("bench", as_dict(md_hit),
                                                                          "The Quillmoor reactor opened in 1987."),
                                                     args.n, "cited-sentence")),
            ("PDF page (rendered, sentence marked)", 3.0, timed(ctx, "bench", run_of("bench", as_dict(pdf_hit), PDF_SENTENCE),
                                                               args.n, "source-page marked")),
        ]
    load = os.getloadavg()[0]
    print(f"Opening a cited source on the server, {args.n} opens each (load average {load:.2f}, "
          f"{time.strftime('%Y-%m-%d')})\n")
    print("| source | target s | p50 s | p95 s | max s |")
    print("|---|---|---|---|---|")
    for name, target, seconds in rows:
        ordered = sorted(seconds)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        print(f"| {name} | {target:g} | {statistics.median(seconds):.3f} | {p95:.3f} | {max(seconds):.3f} |")


if __name__ == "__main__":
    main()
