"""A question whose answer stands in one of the person's documents is researched as one hop first,
without the Planner (a one-hop document question had been planned as two hops, 15 model calls); a
question none of their documents holds is planned as before."""

from __future__ import annotations

import json
from dataclasses import replace

from backend.agent import ResearchAgent, RunRequest
from backend.documents import DocumentStore
from backend.events import AnswerReady, HopAnswered, PlanReady, ReflectionDecided
from backend.runlog import RunLog
from backend.tools.search import WikiSearchTool
from memory_db import MemoryStore
from tests.backend.conftest import scripted_config
from tests.counting_model import Counting

FACT = "The Quillmoor reactor was commissioned in 1987 by the engineer Ada Vantrell."
DECOMPOSITION = "1. Who built the Quillmoor reactor?\n2. When did #1 commission it?"


def call(query: str) -> str:
    return f'<think>look it up</think><tool_call>{json.dumps({"name": "search", "arguments": {"query_list": [query]}})}</tool_call>'


def ask(tmp_path, shared_tools, embedder, scripted_model_class, question, executor_outputs):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "reactors.md").write_text(f"# Reactors\n\n{FACT}\n", encoding="utf-8")
    documents = DocumentStore(tmp_path / "documents", embedder=embedder)
    documents.add_paths("default", "mine", [notes])
    tools = {**shared_tools, "search": WikiSearchTool(shared_tools["search"].index, documents)}
    config = scripted_config(tmp_path, max_turns=3, guided_actions="off", read_by_quote=False, plan_shape="subquestions")
    models = {"planner": Counting(scripted_model_class("planner", [DECOMPOSITION])),
              "executor": Counting(scripted_model_class("executor", executor_outputs)),
              "judge": scripted_model_class("judge"), "manager": scripted_model_class("manager")}
    for model in models.values():
        inner = getattr(model, "model", model)
        inner.traits = replace(inner.traits, small=False, guided_turns=False)
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    try:
        agent = ResearchAgent(config, models=models, tools=tools, store=store, runlog=RunLog(config.runs_dir))
        return list(agent.run(RunRequest(question=question, method="mia"))), models
    finally:
        store.close()


def test_a_question_one_of_the_persons_documents_answers_is_one_hop_without_the_planner(
        tmp_path, shared_tools, embedder, scripted_model_class):
    question = "When was the Quillmoor reactor commissioned?"
    events, models = ask(tmp_path, shared_tools, embedder, scripted_model_class, question,
                         [call("Quillmoor reactor commissioned"), "<think>found</think><answer>1987</answer>"])
    [plan] = [e for e in events if isinstance(e, PlanReady)]
    assert plan.steps == [question] and "one of your documents matches the question" in plan.chosen
    assert "reactors.md" in plan.chosen
    assert models["planner"].calls == 0 and models["executor"].calls == 2
    [hop] = [e for e in events if isinstance(e, HopAnswered)]
    assert hop.answer == "1987" and hop.sentence
    answer = [e for e in events if isinstance(e, AnswerReady)][-1]
    assert answer.text == "1987" and answer.sources[0]["source"] == "doc:mine"


def test_a_question_no_document_holds_is_planned_by_the_planner(tmp_path, shared_tools, embedder, scripted_model_class):
    question = "Which magazine was started first, Arthur's Magazine or First for Women?"
    events, models = ask(tmp_path, shared_tools, embedder, scripted_model_class, question, [])
    plans = [e for e in events if isinstance(e, PlanReady)]
    assert models["planner"].calls >= 1 and not (plans[0].chosen or "").startswith("one of your documents")


def test_a_document_question_whose_one_hop_answer_no_text_states_is_asked_again_as_sub_questions(
        tmp_path, shared_tools, embedder, scripted_model_class):
    """The one hop researched first says "1990", which nothing retrieved states: the Planner, told so,
    writes sub-questions, and their stated answer replaces it."""
    question = "When was the Quillmoor reactor commissioned?"
    events, models = ask(tmp_path, shared_tools, embedder, scripted_model_class, question,
                         [call("Quillmoor reactor commissioned"), "<think>guess</think><answer>1990</answer>",
                          "Ada Vantrell", "1987"])  # then each hop's question is searched and its answer read
    assert any(isinstance(e, ReflectionDecided) and e.replan for e in events)
    again = [e for e in events if isinstance(e, PlanReady) and e.revision == 1]
    assert again and len(again[0].steps) == 2
    assert "found no text stating an answer ('1990')" in models["planner"].model.prompts[0][-1]["content"]
    assert [e.answer for e in events if isinstance(e, HopAnswered)] == ["1990", "Ada Vantrell", "1987"]
    assert [e.text for e in events if isinstance(e, AnswerReady)] == ["1990", "1987"]
