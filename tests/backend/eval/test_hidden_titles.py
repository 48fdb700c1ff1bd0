"""Questions that hide wiki articles from their own search (an image benchmark's scanned page shows
the article instead): hidden for that question alone, and a title the wiki lacks refused up front."""

from __future__ import annotations

import json

import pytest

from backend.eval.results import ResultsFile
from backend.eval.runner import agent_hiding, open_eval_runtime
from backend.eval.spec import ROWS_FILE, EvalError, EvalSpec


def test_the_agent_for_a_hiding_question_never_finds_the_article_and_the_shared_agent_still_does(eval_config, tmp_path):
    runtime = open_eval_runtime(eval_config, tmp_path / "out", progress=False)
    try:
        hiding = agent_hiding(runtime.agent, ("Fyre Festival",))
        query = {"query_list": ["Fyre Festival"]}
        assert "Fyre Festival" not in {p.title for p in hiding.tools["search"](query).passages}
        assert runtime.agent.tools["search"](query).passages[0].title == "Fyre Festival"
        assert hiding.store is runtime.agent.store and hiding.runlog is runtime.agent.runlog
        assert agent_hiding(runtime.agent, ()) is runtime.agent
    finally:
        runtime.close()


def test_an_evaluation_hiding_an_article_the_wiki_lacks_is_refused_before_its_first_question(run_eval, tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(record) for record in [
        {"id": "a", "question": "Where was the Fyre Festival held?", "answer": "Great Exuma"},
        {"id": "b", "question": "Who produced it?", "answer": "Kevin Loader", "hide_titles": ["No Such Article"]},
    ]) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(EvalError, match="no article titled 'No Such Article'"):
        run_eval(EvalSpec(data=questions, method="none", out_dir=out))
    assert ResultsFile(out / ROWS_FILE).read() == []
