"""Image questions: a benchmark of questions whose first hop is in the image.

`build` makes the set from a seed. From the split's HotpotQA questions (a seeded sample): the
paragraph of the question's first hop, rendered as a scanned page (benchmarks/synthetic_images.py),
asked with the question's own words, and that article hidden from the search for that question
(`hide_titles`): the page is the only place the first hop stands. Then each flag of the demo image
index, photo-like, asked which country it is or that country's capital. It writes

    FOLDER/image.jsonl   every question with its image (the benchmark)
    FOLDER/text.jsonl    the page questions as plain text, nothing hidden (the text-only baseline)
    FOLDER/pages/, FOLDER/flags/, FOLDER/set.json (seed, counts and each file's sha256)

`cer` prints the OCR character error rate on the pages, read as the assistant reads them.
`table` prints the benchmark's table from evaluations of image.jsonl and text.jsonl
(`python -m backend.eval`). benchmarks/image_bench.sh runs the whole benchmark, resumably.

    .venv/bin/python benchmarks/image_questions.py build --split train --out .mia/image-bench/train
    .venv/bin/python benchmarks/image_questions.py cer .mia/image-bench/train
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.answer_match import normalize_answer  # noqa: E402
from backend.documents.ocr import ocr_available, read_image_text  # noqa: E402
from backend.eval.datasets import load_questions  # noqa: E402
from backend.eval.metrics import percentile  # noqa: E402
from backend.eval.report import file_digest  # noqa: E402
from backend.eval.results import ResultsFile  # noqa: E402
from backend.eval.significance import paired_comparison  # noqa: E402
from backend.eval.spec import ROWS_FILE, logged_events, read_manifest  # noqa: E402
from backend.prompts.manager import IMAGE_TEXT_SOURCE  # noqa: E402
from backend.replay import replay  # noqa: E402
from backend.tools.corpus import CorpusFiles, load_documents  # noqa: E402
from backend.tools.image_index import demo_images_dir, list_images  # noqa: E402
from benchmarks.synthetic_images import font_files, photo_like, scanned_page  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SEEDS = {"train": 0, "dev": 1}
PAGE, FLAG = "ocr-hop", "index-image"
CAPITALS = {
    "Austria": "Vienna", "Bangladesh": "Dhaka", "Belgium": "Brussels", "Denmark": "Copenhagen",
    "Finland": "Helsinki", "France": "Paris", "Germany": "Berlin", "Ireland": "Dublin", "Italy": "Rome",
    "Japan": "Tokyo", "Netherlands": "Amsterdam", "Poland": "Warsaw", "Russia": "Moscow",
    "Sweden": "Stockholm", "Switzerland": "Bern", "Ukraine": "Kyiv",
}
FLAG_QUESTIONS = (
    ("Which country's flag is shown in this image?", "country"),
    ("What is the capital of the country whose flag is shown in this image?", "capital"),
)
SIMILARITY = re.compile(r"similarity (\d+(?:\.\d+)?)")
NOTICE = "image-text"
NOTICE_CALLS = 4  # the most LLM calls an answer the image's own text states should take


# -- build ------------------------------------------------------------------------------------
def paragraphs_of(record: dict) -> dict[str, str]:
    context = record["context"]
    return {title: "".join(sentences).strip() for title, sentences in zip(context["title"], context["sentences"], strict=True)}


def first_hop(record: dict) -> str | None:
    """The title of the paragraph a reader needs first: a comparison's first option; a bridge's
    paragraph without the answer (the other one states it), else the one the question names more
    of. None when the question has not two supporting paragraphs."""
    titles = list(dict.fromkeys(record["supporting_facts"]["title"]))
    paragraphs = paragraphs_of(record)
    if len(titles) != 2 or not all(title in paragraphs for title in titles):
        return None
    if record.get("type") == "comparison":
        return titles[0]
    answer = normalize_answer(record["answer"])
    without_answer = [t for t in titles if answer not in normalize_answer(paragraphs[t])]
    if len(without_answer) == 1:
        return without_answer[0]
    question = set(normalize_answer(record["question"]).split())
    return max(titles, key=lambda t: len(question & set(normalize_answer(t).split())))


def page_questions(split: str, count: int, rng: random.Random, wiki_titles: set[str]) -> list[tuple[dict, str]]:
    """`count` (question, first-hop title) pairs sampled from the split, in file order."""
    path = REPO / "data" / "hotpotqa" / f"{split}.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    usable = [(i, record, title) for i, record in enumerate(records)
              if (title := first_hop(record)) is not None and title in wiki_titles]
    if len(usable) < count:
        raise SystemExit(f"{path} has {len(usable)} questions with a first hop; ask for at most that many.")
    return [(record, title) for _, record, title in sorted(rng.sample(usable, count), key=lambda item: item[0])]


def flag_country(title: str) -> str:
    return title.removeprefix("Flag of ").removeprefix("the ")


def build(split: str, out: Path, count: int, flags: int = len(CAPITALS)) -> None:
    """`count` questions: `flags` of them flags of the demo image index, the rest scanned pages."""
    rng = random.Random(SEEDS[split])
    fonts = font_files()
    folder = demo_images_dir()
    flag_entries = [e for e in list_images([folder]) if flag_country(e.title) in CAPITALS] if flags and folder else []
    if flags and not flag_entries:
        raise SystemExit("The mia-demo-images package is not installed: run `make install`, or build with --flags 0.")
    flag_entries = flag_entries[:flags]
    if count <= len(flag_entries):
        raise SystemExit(f"--n {count} leaves no page questions beside {len(flag_entries)} flags; ask for more.")
    wiki_titles = {document.title for document in load_documents(CorpusFiles.default())}
    (out / "pages").mkdir(parents=True, exist_ok=True)
    (out / "flags").mkdir(exist_ok=True)
    image_records, text_records = [], []
    for record, title in page_questions(split, count - len(flag_entries), rng, wiki_titles):
        text = paragraphs_of(record)[title]
        image_path = out / "pages" / f"{record['id']}.jpg"
        scanned_page(title, text, rng, fonts).save(image_path, quality=rng.randint(60, 90))
        common = {"id": f"page-{record['id']}", "question": record["question"], "answer": record["answer"],
                  "kind": PAGE, "first_hop": title}
        image_records.append({**common, "image": f"pages/{image_path.name}", "hide_titles": [title],
                              "rendered_text": f"{title}\n{text}"})
        text_records.append(common)
    for entry in flag_entries:
        question, asks = rng.choice(FLAG_QUESTIONS)
        country = flag_country(entry.title)
        image_path = out / "flags" / f"{entry.path.stem}.jpg"
        photo_like(Image.open(entry.path), rng).save(image_path, quality=rng.randint(50, 90))
        image_records.append({"id": f"flag-{entry.path.stem}", "question": question,
                              "answer": country if asks == "country" else CAPITALS[country],
                              "kind": FLAG, "image": f"flags/{image_path.name}"})
    write_jsonl(out / "image.jsonl", image_records)
    write_jsonl(out / "text.jsonl", text_records)
    # the set's own files only: a driver's logs and other runs' outputs may share the folder
    files = sorted([*(out / "pages").glob("*.jpg"), *(out / "flags").glob("*.jpg"), out / "image.jsonl", out / "text.jsonl"])
    manifest = {"split": split, "seed": SEEDS[split], "pages": len(text_records), "flags": len(flag_entries),
                "files": {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}}
    (out / "set.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    load_questions(out / "image.jsonl")  # the harness reads it: fail here, not at the first question
    print(f"{out}: {len(text_records)} page questions, {len(flag_entries)} flag questions; "
          f"image.jsonl sha256 {file_digest(out / 'image.jsonl')}")


# -- notices: questions the image's own text answers -------------------------------------------
_SYLLABLES = ("val", "mar", "ken", "dor", "lis", "bro", "thal", "wen", "ost", "rik", "sen", "hald", "mor", "tes")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_COLOURS = ("red", "blue", "green", "yellow", "black", "grey", "brown")
_ITEMS = ("umbrella", "suitcase", "violin case", "rucksack", "bicycle", "coat")
_GIVEN = ("Ilse", "Joran", "Maud", "Tobias", "Wenna", "Corin", "Agathe", "Pieter")


def _invented_name(rng: random.Random, parts: int = 2) -> str:
    """A place or family name that is in no corpus, so that only the image can state the fact."""
    return "".join(rng.choice(_SYLLABLES) for _ in range(parts)).capitalize()


def _date(rng: random.Random) -> str:
    return f"{rng.randint(2, 27)} {rng.choice(_MONTHS)} {rng.randint(2025, 2027)}"


def notice(rng: random.Random) -> tuple[str, str, str, str]:
    """(heading, text, question, answer): a printed notice of invented facts and a question its text
    answers, of one of eight kinds (tariffs, hours, fees, closures, names, lost property, timetables,
    deadlines)."""
    town = _invented_name(rng)
    kind = rng.randrange(8)
    if kind == 0:
        n = rng.randint(3, 95)
        return (f"Harbour of {town}", f"Landing tariff {rng.randint(2025, 2027)}: {n} crowns per tonne. Paid at the "
                "harbour office before unloading.", "What landing tariff per tonne does the notice in this image state?",
                f"{n} crowns")
    if kind == 1:
        closing = rng.randint(16, 21)
        return (f"{town} Public Library", f"Open {rng.choice(_DAYS[:2])} to {rng.choice(_DAYS[4:6])}, "
                f"{rng.randint(8, 10)}:00 to {closing}:00. Closed on public holidays.",
                "At what time does the library in this image close?", f"{closing}:00")
    if kind == 2:
        fee = rng.randint(4, 40)
        return (f"{town} Museum of Clocks", f"Admission {fee} marks, children under twelve free. Guided tours on "
                "the hour.", "How much is admission according to the notice in this image?", f"{fee} marks")
    if kind == 3:
        until = _date(rng)
        return (f"Notice of closure: {town} Bridge", f"The {town} Bridge is closed to all traffic until {until} for "
                "repairs to its deck.", "Until what date is the bridge in this image closed?", until)
    if kind == 4:
        person = f"{rng.choice(_GIVEN)} {_invented_name(rng)}"
        return (f"{town} Rowing Club", f"Annual regatta on {_date(rng)}. Entries to the club secretary, {person}, "
                "by the end of the month.", "Who is the club secretary named in this image?", person)
    if kind == 5:
        colour, item = rng.choice(_COLOURS), rng.choice(_ITEMS)
        return ("Lost property", f"A {colour} {item} was found on platform {rng.randint(1, 9)} of {town} station. "
                "Ask at the ticket office.", "What colour is the lost item on the notice in this image?", colour)
    if kind == 6:
        time_ = f"{rng.randint(5, 8)}:{rng.choice(('05', '15', '20', '35', '45', '50'))}"
        return (f"Bus route {rng.randint(10, 99)} timetable", f"First departure from {town} Square at {time_}, then "
                "every twenty minutes until midnight.", "When does the first bus leave according to this image?", time_)
    deadline = _date(rng)
    return (f"{town} Water Board", f"Applications for garden water permits close on {deadline}. Forms from the "
            "town hall.", "By what date must applications be made according to the notice in this image?", deadline)


def build_notices(split: str, out: Path, count: int) -> None:
    """`count` printed notices of invented facts, rendered as scanned pages, each with a question its
    text answers: FOLDER/notices.jsonl and FOLDER/notices/ (seeded apart from the other questions)."""
    rng = random.Random(1000 + SEEDS[split])
    fonts = font_files()
    (out / "notices").mkdir(parents=True, exist_ok=True)
    records = []
    for number in range(count):
        heading, text, question, answer = notice(rng)
        image_path = out / "notices" / f"{number:03d}.jpg"
        scanned_page(heading, text, rng, fonts).save(image_path, quality=rng.randint(60, 90))
        records.append({"id": f"notice-{number:03d}", "question": question, "answer": answer, "kind": NOTICE,
                        "image": f"notices/{image_path.name}", "rendered_text": f"{heading}\n{text}"})
    write_jsonl(out / "notices.jsonl", records)
    load_questions(out / "notices.jsonl")
    print(f"{out}: {count} notice questions; notices.jsonl sha256 {file_digest(out / 'notices.jsonl')}")


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# -- OCR character error rate ------------------------------------------------------------------
def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions of characters."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def character_error_rate(read: str, truth: str) -> float:
    """Edits from what was read to the truth per character of the truth, whitespace runs as one space."""
    read, truth = " ".join(read.split()), " ".join(truth.split())
    return edit_distance(read, truth) / max(len(truth), 1)


def cer(folder: Path) -> None:
    if not ocr_available():
        raise SystemExit("tesseract is not installed: `sudo apt-get install tesseract-ocr`.")
    pages = [r for r in read_jsonl(folder / "image.jsonl") if r["kind"] == PAGE]
    rates, seconds = [], []
    for record in pages:
        started = time.perf_counter()
        read = read_image_text(str(folder / record["image"])) or ""
        seconds.append(time.perf_counter() - started)
        rates.append(character_error_rate(read, record["rendered_text"]))
    ordered = sorted(rates)
    print(f"OCR on {len(pages)} rendered pages of {folder} (tesseract, as the assistant reads an image)")
    print("| pages | CER mean | CER median | CER p90 | pages with CER < 2% | seconds per page (median) |")
    print("|---|---|---|---|---|---|")
    print(f"| {len(pages)} | {statistics.mean(rates):.2%} | {statistics.median(rates):.2%} | "
          f"{ordered[int(0.9 * (len(ordered) - 1))]:.2%} | {sum(r < 0.02 for r in rates)} | {statistics.median(seconds):.1f} |")


# -- table -------------------------------------------------------------------------------------
def run_facts(eval_dir: Path, row) -> dict:
    """From a row's logged run: whether its answer cites the image's text, and its image caption."""
    events = logged_events(eval_dir, read_manifest(eval_dir)["namespace"], row.run_id) or []
    run = replay(events)
    answer = run.answers[-1] if run.answers else None
    started = run.started
    return {"cites_image": bool(answer and any(s.get("source") == IMAGE_TEXT_SOURCE for s in answer.sources)),
            "caption_source": (started.caption_source or "") if started else "",
            "caption": (started.caption or "") if started else ""}


ROW_COLUMNS = ("N", "judge accuracy", "EM", "F1", "forced", "cites the image", "LLM calls p50", "p50 s", "p95 s")


def row_header(first: str) -> str:
    """The header of row_line's table, its first column named FIRST."""
    return f"| {first} | {' | '.join(ROW_COLUMNS)} |\n|---|{'---|' * len(ROW_COLUMNS)}"


def row_line(label: str, rows: list, facts: list[dict] | None) -> str:
    n = len(rows)
    cited = f"{sum(f['cites_image'] for f in facts)}" if facts is not None else "–"
    return (f"| {label} | {n} | {sum(r.correct for r in rows) / n:.1%} | {sum(r.em for r in rows) / n:.1%} | "
            f"{sum(r.f1 for r in rows) / n:.3f} | {sum(r.forced_answer for r in rows)} | {cited} | "
            f"{percentile([r.llm_calls for r in rows], 50):.0f} | {percentile([r.wall_seconds for r in rows], 50):.1f} | "
            f"{percentile([r.wall_seconds for r in rows], 95):.1f} |")


def table(folder: Path, image_eval: Path, text_evals: list[Path], threshold: float) -> None:
    kinds = {r["id"]: r["kind"] for r in read_jsonl(folder / "image.jsonl")}
    image_rows = ResultsFile(image_eval / ROWS_FILE).read()
    facts = {row.id: run_facts(image_eval, row) for row in image_rows}
    method = read_manifest(image_eval)["method"]
    pages = [r for r in image_rows if kinds.get(r.id) == PAGE]
    flags = [r for r in image_rows if kinds.get(r.id) == FLAG]
    print(f"Image questions of {folder} (set.json sha256 {file_digest(folder / 'set.json')[:16]})")
    print(row_header("questions"))
    print(row_line(f"scanned first hop, with the image ({method})", pages, [facts[r.id] for r in pages]))
    if flags:
        print(row_line(f"flags of the image index ({method})", flags, [facts[r.id] for r in flags]))
    text_rows = {}
    for text_eval in text_evals:
        text_method = read_manifest(text_eval)["method"]
        by_id = {r.id: r for r in ResultsFile(text_eval / ROWS_FILE).read()}
        text_rows[text_eval] = by_id
        same = [by_id[r.id] for r in pages if r.id in by_id]
        print(row_line(f"the same questions as text, nothing hidden ({text_method})", same, None))
    for text_eval, by_id in text_rows.items():
        paired = [r for r in pages if r.id in by_id]
        c = paired_comparison([by_id[r.id] for r in paired], paired)
        low, high = c.interval
        print(f"\nWith the image against {read_manifest(text_eval)['method']} on text, paired on {c.questions} "
              f"questions: {c.difference:+.1%} (95% bootstrap {low:+.1%} to {high:+.1%}), right only with the "
              f"image {c.only_this}, only as text {c.only_reference}, exact McNemar p = {c.p_value:.3f}")
    captioned = [(r.id, facts[r.id]) for r in image_rows if facts[r.id]["caption_source"].startswith("image-search")]
    below = [i for i, f in captioned if (m := SIMILARITY.search(f["caption"])) and float(m.group(1)) < threshold]
    print(f"\nCaptions from the image index: {sum(kinds.get(i) == FLAG for i, _ in captioned)} of {len(flags)} flags, "
          f"{sum(kinds.get(i) == PAGE for i, _ in captioned)} of {len(pages)} pages; "
          f"below the threshold {threshold:.2f}: {len(below)}")
    for path in [image_eval, *text_evals]:
        print(f"rows: {path / ROWS_FILE} sha256 {file_digest(path / ROWS_FILE)}")


def notices_table(folder: Path, evals: list[Path]) -> None:
    """Each evaluation of FOLDER/notices.jsonl: its usual columns, and how many answers meet the target
    for a question the image's own text answers (right, not forced, cited to the image, at most
    NOTICE_CALLS LLM calls)."""
    print(f"Notices of {folder} (notices.jsonl sha256 {file_digest(folder / 'notices.jsonl')[:16]})")
    print(row_header("evaluation"))
    met_lines = []
    for path in evals:
        rows = ResultsFile(path / ROWS_FILE).read()
        facts = [run_facts(path, row) for row in rows]
        print(row_line(path.name, rows, facts))
        met = sum(r.correct and not r.forced_answer and f["cites_image"] and r.llm_calls <= NOTICE_CALLS
                  for r, f in zip(rows, facts, strict=True))
        met_lines.append(f"- {path.name}: {met} of {len(rows)} right, not forced, cited to the image and in at most "
                         f"{NOTICE_CALLS} LLM calls; rows sha256 {file_digest(path / ROWS_FILE)}")
    print("\n" + "\n".join(met_lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("build", help="make the question set from a seed")
    make.add_argument("--split", choices=tuple(SEEDS), default="train")
    make.add_argument("--n", type=int, default=100, help="questions in all (the flags among them)")
    make.add_argument("--flags", type=int, default=len(CAPITALS), help="flag questions among them (0: pages only)")
    make.add_argument("--out", type=Path, required=True)
    posted = commands.add_parser("notices", help="printed notices of invented facts, each asked what it states")
    posted.add_argument("--split", choices=tuple(SEEDS), default="train")
    posted.add_argument("--n", type=int, default=20)
    posted.add_argument("--out", type=Path, required=True)
    read = commands.add_parser("cer", help="OCR character error rate on the rendered pages")
    read.add_argument("folder", type=Path)
    show = commands.add_parser("table", help="the benchmark's table from its evaluations")
    show.add_argument("folder", type=Path)
    show.add_argument("--image", type=Path, required=True, help="the evaluation of FOLDER/image.jsonl")
    show.add_argument("--text", type=Path, action="append", default=[], help="an evaluation of FOLDER/text.jsonl")
    told = commands.add_parser("notices-table", help="the notices' table from their evaluations")
    told.add_argument("folder", type=Path)
    told.add_argument("--eval", type=Path, action="append", required=True, help="an evaluation of FOLDER/notices.jsonl")
    show.add_argument("--caption-threshold", type=float, default=None,
                      help="the caption similarity threshold (default: the configuration's)")
    args = parser.parse_args()
    if args.command == "build":
        build(args.split, args.out, args.n, args.flags)
    elif args.command == "notices":
        build_notices(args.split, args.out, args.n)
    elif args.command == "notices-table":
        notices_table(args.folder, args.eval)
    elif args.command == "cer":
        cer(args.folder)
    else:
        threshold = args.caption_threshold
        if threshold is None:
            from backend.config import load_config

            threshold = load_config().agent.caption_min_similarity
        table(args.folder, args.image, args.text, threshold)


if __name__ == "__main__":
    main()
