"""The Executor's own trajectories, kept only when the Judge grades them right against the ground
truth and a retrieved sentence states the answer; the file resumes where it stopped."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

from backend.agent import ResearchAgent
from backend.config import RoleConfig, load_config
from memory_db import MemoryStore
from training.reader_data import load_rows
from training.reader_trajectories import sample_trajectories, verified_trajectory

QUESTION = 'The band who released the debut album "Tinted Windows" had their first performance in what city?'
SCRIPTED = Path(__file__).resolve().parents[1] / "backend" / "scripted_model.py"


def scripted_executor():
    spec = importlib.util.spec_from_file_location("scripted_model", SCRIPTED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ScriptedChatModel("executor", [module.tool_call_turn("search", query_list=["Tinted Windows band"]),
                                                  module.answer_turn("Tulsa")])
    model.traits = replace(model.traits, small=False, guided_turns=False)  # free-form turns, as served models take
    return model, module


def agent_for(tmp_path, shared_tools, embedder):
    base = load_config()
    config = replace(base, data_dir=tmp_path, memory_url=f"sqlite:///{tmp_path / 'memory.sqlite'}",
                     agent=replace(base.agent, max_turns=4, guided_actions="off"),
                     roles={name: RoleConfig() for name in base.roles})
    executor, module = scripted_executor()
    models = {role: module.ScriptedChatModel(role) for role in ("planner", "judge", "manager")}
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    return ResearchAgent(config, models={**models, "executor": executor}, tools=shared_tools, store=store), store


def trajectory_for(gold: str, tmp_path, shared_tools, embedder):
    agent, store = agent_for(tmp_path, shared_tools, embedder)
    try:
        return verified_trajectory(agent, {"id": "q", "question": QUESTION, "answer": gold}, temperature=0.0, seed=0)
    finally:
        store.close()


def test_a_run_judged_right_is_kept_with_every_call_of_the_executor(tmp_path, shared_tools, embedder):
    reads, answer = trajectory_for("Tulsa", tmp_path, shared_tools, embedder)
    assert answer == "Tulsa"
    assert len(reads) == 2  # the turn that searched, the turn that answered
    first, second = reads
    assert '"query_list"' in first[1][-1]["text"] and "Tinted Windows" in first[1][-1]["text"]
    assert "<tool_response>" in "\n".join(m["content"] for m in second[0])
    assert second[1][-1]["text"].endswith("<answer>Tulsa</answer>")


def test_a_run_judged_wrong_is_not_kept(tmp_path, shared_tools, embedder):
    reads, answer = trajectory_for("Chicago", tmp_path, shared_tools, embedder)
    assert answer == "Tulsa" and reads == []


def test_the_file_resumes_where_it_stopped(tmp_path, shared_tools, embedder):
    out = tmp_path / "trajectories.jsonl"
    agent, store = agent_for(tmp_path, shared_tools, embedder)
    try:
        counts = sample_trajectories(agent, [{"id": "q1", "question": QUESTION, "answer": "Tulsa"}], out, k=1,
                                     progress=False)
        again = sample_trajectories(agent, [{"id": "q1", "question": QUESTION, "answer": "Tulsa"}], out, k=1,
                                    progress=False)
    finally:
        store.close()
    assert counts["kept_runs"] == 1 and counts["examples"] == 2
    assert again["questions"] == 0 and again["already_done"] == 1
    rows = load_rows(out)
    assert len(rows) == 2 and {r["source"] for r in rows} == {"trajectories"}
    ledger = [json.loads(line) for line in (tmp_path / "trajectories.jsonl.progress").read_text().splitlines()]
    assert ledger == [{"id": "q1", "samples": 1, "kept": 1, "examples": 2}]
