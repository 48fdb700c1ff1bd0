"""benchmarks/search_gain.py: which questions a variant gains under one search, and how the other
search's runs answered them, read from real evaluation folders (rows, run logs, a question file)."""

from __future__ import annotations

import json

from backend.eval.results import EvalRow, ResultsFile
from backend.eval.spec import ROWS_FILE
from backend.events import AnswerReady, RunStarted, ToolReturned
from backend.runlog import RunLog
from benchmarks.search_gain import Evaluation, gain_report, main

NAMESPACE = "eval-x"
PAGES = {"q1": ["Alpha", "Beta"], "q2": ["Gamma", "Delta"], "q3": ["Eps", "Zeta"]}


def build(tmp_path, name: str, outcomes: dict[str, tuple[bool, list[str]]]):
    """An evaluation folder whose run for each question was right or wrong and returned the given pages."""
    folder = tmp_path / name
    data = tmp_path / "questions.jsonl"
    data.write_text("".join(json.dumps({"id": q, "question": f"Question {q}?", "answer": "a",
                                        "supporting_facts": {"title": t, "sent_id": [0, 0]}}) + "\n"
                            for q, t in PAGES.items()), encoding="utf-8")
    runlog = RunLog(folder / "runs")
    results = ResultsFile(folder / ROWS_FILE)
    for index, (qid, (correct, pages)) in enumerate(outcomes.items()):
        run_id = f"run-{qid}"
        runlog.append(NAMESPACE, RunStarted(run_id, question="q", namespace=NAMESPACE))
        runlog.append(NAMESPACE, ToolReturned(run_id, turn=1, name="search", ok=True, content="",
                                              passages=[{"title": p, "text": p} for p in pages + ["Noise"]]))
        runlog.append(NAMESPACE, AnswerReady(run_id, text="a" if correct else "b", read_from=pages))
        results.append(EvalRow(index=index, id=qid, question=f"Question {qid}?", gold="a",
                               answer="a" if correct else "b", verdict="correct" if correct else "incorrect",
                               judge_method="", correct=correct, em=float(correct), f1=float(correct), llm_calls=1,
                               prompt_tokens=1, completion_tokens=1, tool_calls=1, wall_seconds=1, llm_seconds=1,
                               tool_seconds=0, other_seconds=0, harness_seconds=1, memories_used=0, run_id=run_id))
    (folder / "eval.json").write_text(json.dumps({"label": name, "method": name, "namespace": NAMESPACE,
                                                  "data": str(data), "limit": None}), encoding="utf-8")
    return folder


def test_the_gains_under_one_search_are_shown_with_how_the_other_search_answered_them(tmp_path, capsys):
    # With BM25 the variant gains q1 (its baseline found one page of two) and loses q3; with hybrid the
    # baseline already finds both pages of q1 and answers it.
    folders = [build(tmp_path, "bm25-none", {"q1": (False, ["Alpha"]), "q2": (True, ["Gamma", "Delta"]),
                                             "q3": (True, ["Eps"])}),
               build(tmp_path, "bm25-mia", {"q1": (True, ["Alpha", "Beta"]), "q2": (True, ["Gamma", "Delta"]),
                                            "q3": (False, [])}),
               build(tmp_path, "hybrid-none", {"q1": (True, ["Alpha", "Beta"]), "q2": (True, ["Gamma"]),
                                               "q3": (True, ["Eps", "Zeta"])}),
               build(tmp_path, "hybrid-mia", {"q1": (True, ["Beta", "Alpha"]), "q2": (False, []),
                                              "q3": (True, ["Zeta"])})]
    evaluations = [Evaluation(f, None) for f in folders]
    assert [evaluations[0].gold_pages_retrieved(q) for q in PAGES] == [1, 2, 1]

    lines = gain_report((evaluations[0], evaluations[1]), (evaluations[2], evaluations[3]), ("BM25", "hybrid"))
    assert "| variant right, baseline wrong (BM25) | 1 | 0 | 1 | 1 | 1 |" in lines
    assert "| baseline right, variant wrong (BM25) | 1 | 1 | 0 | 1 | 1 |" in lines
    assert "| all | 3 | 2 | 2 | 3 | 2 |" in lines
    # pages by count none / one / both: over the gained question, then all three
    assert "| variant right, baseline wrong (BM25) | 0 / 1 / 0 | 0 / 0 / 1 | 0 / 0 / 1 | 0 / 0 / 1 |" in lines
    assert "| all | 0 / 2 / 1 | 1 / 0 / 2 | 0 / 1 / 2 | 1 / 1 / 1 |" in lines
    assert "| 1 | Question q1? | wrong, 1 page | right, 2 pages | right, 2 pages | right, 2 pages |" in lines

    assert main(["--first", str(folders[0]), str(folders[1]), "--second", str(folders[2]), str(folders[3]),
                 "--limit", "2"]) == 0
    assert "2 questions in all four evaluations." in capsys.readouterr().out
