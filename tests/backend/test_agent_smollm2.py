"""One HotpotQA question through the whole loop on the real embedded SmolLM2-135M-Instruct."""

from __future__ import annotations

import pytest

from backend.agent import RunRequest
from backend.events import AnswerReady, MemoryStored, PlanReady, RunFinished, ToolReturned, VerdictReady


@pytest.mark.timeout(600)  # the first test of a session to use the real model prepares it from its wheels, then runs the whole loop
@pytest.mark.slow
def test_smollm2_researches_a_hotpotqa_question_end_to_end(tmp_path, smollm2_dir, build_agent):
    agent = build_agent(tmp_path, smollm2_dir, max_turns=3, reflections=1)
    question = 'The band who released the debut album "Tinted Windows" had their first performance in what city?'
    events = list(agent.run(RunRequest(question, ground_truth="Tulsa")))
    assert isinstance(events[-1], RunFinished), events[-1].to_dict()
    plan = next(e for e in events if isinstance(e, PlanReady))
    assert plan.steps and plan.text.startswith("1.")
    searches = [e for e in events if isinstance(e, ToolReturned) and e.name == "search" and e.ok]
    assert searches and all(e.passages for e in searches)
    answers = [e for e in events if isinstance(e, AnswerReady)]
    assert answers and answers[-1].text.strip()
    verdict = next(e for e in events if isinstance(e, VerdictReady))
    assert verdict.label in ("correct", "incorrect", "not_attempted")
    stored = next(e for e in events if isinstance(e, MemoryStored))
    memory = agent.store.get(stored.memory_id, namespace="default")
    assert memory.summary and len(memory.summary.split()) <= 300
    assert memory.correct == (verdict.label == "correct")
    assert memory.provenance["models"]["executor"].startswith("embedded:")
