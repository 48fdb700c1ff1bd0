"""The image benchmark (benchmarks/image_questions.py): which paragraph is a question's first hop, a
set rebuilt byte for byte from its seed, the OCR error rate, and its table from real evaluations."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from backend.eval.datasets import load_questions
from backend.eval.spec import EvalSpec
from backend.tools.corpus import CorpusFiles, load_documents
from benchmarks import image_questions
from benchmarks.image_questions import FLAG, PAGE, build, character_error_rate, first_hop, table

needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None, reason="needs Debian's tesseract-ocr (CI installs it)")


def record(question, answer, kind, paragraphs, supporting):
    return {"question": question, "answer": answer, "type": kind,
            "supporting_facts": {"title": supporting, "sent_id": [0] * len(supporting)},
            "context": {"title": list(paragraphs), "sentences": [[text] for text in paragraphs.values()]}}


def test_the_first_hop_is_the_bridge_paragraph_without_the_answer_or_the_first_option():
    paragraphs = {"Tinted Windows (album)": "Tinted Windows is the debut album of the band Tinted Windows.",
                  "Tinted Windows (band)": "The band first performed in Tulsa.", "Other": "Unrelated."}
    bridge = record("The band who released Tinted Windows first performed in what city?", "Tulsa", "bridge",
                    paragraphs, ["Tinted Windows (album)", "Tinted Windows (band)", "Tinted Windows (band)"])
    assert first_hop(bridge) == "Tinted Windows (album)"
    comparison = record("Who is older, A or B?", "B", "comparison", {"A": "A was born in 1950 (B).", "B": "B was born in 1940."},
                        ["A", "B"])
    assert first_hop(comparison) == "A"
    both_state_it = record("Which sport is played at the BayArena?", "football", "bridge",
                           {"Bayer 04": "Bayer 04 plays football.", "BayArena": "The BayArena is a football stadium."},
                           ["Bayer 04", "BayArena"])
    assert first_hop(both_state_it) == "BayArena"
    assert first_hop(record("Q?", "A", "bridge", {"One": "A."}, ["One"])) is None


def test_the_character_error_rate_counts_edits_per_character_of_the_truth():
    assert character_error_rate("Tulsa  is\na city", "Tulsa is a city") == 0.0
    assert character_error_rate("Tulso", "Tulsa") == pytest.approx(1 / 5)
    assert character_error_rate("Tuls", "Tulsa") == pytest.approx(1 / 5)
    assert character_error_rate("", "Tulsa") == 1.0


def test_a_set_is_rebuilt_byte_for_byte_from_its_seed_and_hides_each_pages_article(tmp_path):
    build("train", tmp_path / "a", 4, flags=1)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "load.log").write_text("2026-12-05T16:30:31Z 1.0 1.0 1.0\n")  # a driver's log beside the set
    build("train", tmp_path / "b", 4, flags=1)
    assert (tmp_path / "a" / "set.json").read_bytes() == (tmp_path / "b" / "set.json").read_bytes()
    records = [json.loads(line) for line in (tmp_path / "a" / "image.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["kind"] for r in records] == [PAGE, PAGE, PAGE, FLAG]
    wiki = {document.title for document in load_documents(CorpusFiles.default())}
    for page in records[:3]:
        assert page["hide_titles"] == [page["first_hop"]] and page["first_hop"] in wiki
        assert page["rendered_text"].startswith(page["first_hop"] + "\n")
    flag = records[3]
    assert flag["image"].startswith("flags/") and "hide_titles" not in flag
    assert flag["answer"] in {*image_questions.CAPITALS, *image_questions.CAPITALS.values()}
    text = load_questions(tmp_path / "a" / "text.jsonl")
    assert [q.id for q in text] == [r["id"] for r in records[:3]] and all(q.image is None and not q.hidden_titles for q in text)
    assert [q.hidden_titles for q in load_questions(tmp_path / "a" / "image.jsonl")][:3] == [tuple(r["hide_titles"]) for r in records[:3]]
    build("dev", tmp_path / "dev", 4, flags=1)
    assert {r["id"] for r in records} != {json.loads(line)["id"] for line in (tmp_path / "dev" / "image.jsonl").open()}


@needs_tesseract
def test_ocr_reads_the_rendered_pages_nearly_as_written_and_the_table_pairs_image_and_text_runs(run_eval, tmp_path, capsys):
    folder = tmp_path / "set"
    build("train", folder, 3, flags=1)
    image_questions.cer(folder)
    cer_table = capsys.readouterr().out
    mean = float(re.search(r"^\| 2 \| ([\d.]+)% \|", cer_table, re.M).group(1))
    assert mean < 5.0
    image_eval = tmp_path / "image-none"
    run_eval(EvalSpec(data=folder / "image.jsonl", method="none", out_dir=image_eval))
    text_eval = tmp_path / "text-none"
    run_eval(EvalSpec(data=folder / "text.jsonl", method="none", out_dir=text_eval))
    table(folder, image_eval, [text_eval], 0.92)
    shown = capsys.readouterr().out
    assert re.search(r"^\| scanned first hop, with the image \(none\) \| 2 \|", shown, re.M)
    assert re.search(r"^\| flags of the image index \(none\) \| 1 \|", shown, re.M)
    assert re.search(r"^\| the same questions as text, nothing hidden \(none\) \| 2 \|", shown, re.M)
    assert "paired on 2 questions" in shown
    assert re.search(r"of 1 flags, 0 of 2 pages; below the threshold 0.92: 0$", shown, re.M)
    assert len(re.findall(r"^rows: .* sha256 [0-9a-f]{64}$", shown, re.M)) == 2


def test_notices_state_invented_facts_and_are_rebuilt_from_their_seed(tmp_path):
    image_questions.build_notices("train", tmp_path / "a", 16)
    image_questions.build_notices("train", tmp_path / "b", 16)
    a, b = (tmp_path / "a" / "notices.jsonl").read_bytes(), (tmp_path / "b" / "notices.jsonl").read_bytes()
    assert a == b and (tmp_path / "a" / "notices" / "003.jpg").read_bytes() == (tmp_path / "b" / "notices" / "003.jpg").read_bytes()
    records = [json.loads(line) for line in a.decode("utf-8").splitlines()]
    assert all(r["kind"] == image_questions.NOTICE and r["answer"] in r["rendered_text"] for r in records)
    assert len({r["question"] for r in records}) >= 5  # several kinds of notice
    wiki = " ".join(document.title for document in load_documents(CorpusFiles.default()))
    headings = [r["rendered_text"].split("\n")[0] for r in records]
    assert not any(heading in wiki for heading in headings)  # only the image states them
    image_questions.build_notices("dev", tmp_path / "dev", 16)
    assert (tmp_path / "dev" / "notices.jsonl").read_bytes() != a


@needs_tesseract
def test_the_notices_table_counts_answers_right_from_the_image_in_few_calls(run_eval, tmp_path, capsys):
    folder = tmp_path / "notices"
    image_questions.build_notices("train", folder, 2)
    evaluation = tmp_path / "notices-none"
    run_eval(EvalSpec(data=folder / "notices.jsonl", method="none", out_dir=evaluation))
    image_questions.notices_table(folder, [evaluation])
    shown = capsys.readouterr().out
    assert re.search(r"^\| notices-none \| 2 \|", shown, re.M)
    met = re.search(r"^- notices-none: (\d) of 2 right, not forced, cited to the image and in at most 4 LLM calls; "
                    r"rows sha256 [0-9a-f]{64}$", shown, re.M)
    assert met is not None
