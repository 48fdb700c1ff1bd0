"""benchmarks/shared_facts.py: what one set of questions can teach another by facts alone."""

from __future__ import annotations

from backend.config import REPO_ROOT
from benchmarks.shared_facts import main, overlap, stream_overlap


def question(qid: str, answer: str, *pages: str) -> dict:
    return {"id": qid, "question": f"Question {qid}?", "answer": answer, "supporting_facts": {"title": list(pages)}}


def test_a_later_question_counts_when_it_rests_on_an_earlier_page_or_has_an_earlier_answer():
    earlier = [question("a", "Tulsa", "Tinted Windows (band)", "Tulsa"), question("b", "yes", "Paris", "Lyon")]
    later = [question("c", "1998", "Tinted Windows (band)", "Hanson"),
             question("d", "Tulsa, Oklahoma.", "Oklahoma", "Route 66"),
             question("e", "Yes", "Berlin", "Bonn"),  # "yes" is no fact a memory carries
             question("f", "Rome", "Rome", "Italy")]
    assert overlap(earlier, later) == {"later questions": 4, "resting on an earlier supporting page": 1,
                                       "with an earlier open answer as theirs": 0, "either": 1}
    assert overlap(earlier, [question("g", "tulsa", "X", "Y")])["with an earlier open answer as theirs"] == 1
    assert stream_overlap(earlier + later)["resting on an earlier supporting page"] == 1
    assert stream_overlap(later + earlier)["either"] == 1  # a stream counts against earlier questions only


def test_the_repository_question_files_share_no_supporting_page_across_the_taught_and_later_sets(capsys):
    dev = REPO_ROOT / "data/hotpotqa/dev.jsonl"
    main([f"{dev}:0:100", f"{dev}:100:200"])
    row = capsys.readouterr().out.strip().splitlines()[-1]
    assert row == f"| {dev}:0:100 | {dev}:100:200 | 100 | 0 | 0 | 0 |"
