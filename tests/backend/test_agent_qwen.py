"""The default model answers a real question: every role on Qwen2.5-Coder-1.5B-Instruct on
llama.cpp, assembled from its wheels into the test cache, through the whole loop (slow: ~1-2 min)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from backend.agent import ResearchAgent, RunRequest
from backend.config import RoleConfig, load_config
from backend.events import AnswerReady, RunFinished, VerdictReady
from backend.judge import answer_contains
from backend.runlog import RunLog
from backend.runtime import make_chat_model
from memory_db import MemoryStore


@pytest.mark.timeout(600)  # assembles the 1.5B model from 22 wheels, then runs the whole loop on 2 cores (~1-2 min)
@pytest.mark.slow
def test_qwen_on_llamacpp_answers_a_question_from_the_wiki(tmp_path, qwen_gguf, shared_tools, embedder):
    base = load_config(environ={})
    role = RoleConfig(backend="llamacpp", model_file=str(qwen_gguf), max_new_tokens=96)
    config = replace(base, data_dir=tmp_path, memory_url=f"sqlite:///{tmp_path / 'memory.sqlite'}",
                     roles={name: role for name in base.roles})
    models = {name: make_chat_model(config, name, progress=False) for name in config.roles}
    assert len({id(m) for m in models.values()}) == 1  # one loaded model serves every role
    assert models["executor"].name == "llamacpp:Qwen2.5-Coder-1.5B-Instruct"
    assert not models["executor"].traits.small
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
    # A bridge question (train split): the festival is found through the person.
    question = "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?"
    events = list(agent.run(RunRequest(question, method="none", ground_truth="Great Exuma")))
    answer = [e for e in events if isinstance(e, AnswerReady)][-1]
    assert answer_contains(answer.text, "Great Exuma")
    verdict = next(e for e in events if isinstance(e, VerdictReady))
    assert verdict.label == "correct"
    assert isinstance(events[-1], RunFinished)
    store.close()
