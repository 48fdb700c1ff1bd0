"""The verl recipe's CPU-checkable parts: configs, reward function, dataset rows, tool, agent loops."""

from __future__ import annotations

import asyncio
import os

import pandas as pd
import pytest

from backend import protocol
from training.datasets import RLRecord
from training.verl_recipe.data import verl_row, write_verl_parquet
from training.verl_recipe.reward import compute_score, transcript_steps
from training.verl_recipe.stage_config import VerlConfigError, load_stage_config

RECORD = RLRecord("When did the Russian Civil War end?", "October 1922", "hotpotqa:x", "Successful strategies: none found.",
                  "1. Search the war\n2. Find the end date", ["Search the war", "Find the end date"])


def in_fresh_thread(run, argument):
    """Run off the main thread: browser tests in the same session may leave an event loop running
    there, and asyncio refuses to nest loops."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run, argument).result()


@pytest.mark.parametrize("stage", ["executor", "planner"])
def test_stage_configs_carry_the_paper_settings_and_pass_verl_validation(stage):
    config = load_stage_config(stage)
    rollout = config.actor_rollout_ref.rollout
    assert rollout.n == 8
    assert config.actor_rollout_ref.actor.optim.lr == 1e-6
    assert config.data.train_batch_size == 128
    assert config.algorithm.adv_estimator == "grpo"
    assert not config.algorithm.use_kl_in_reward and not config.actor_rollout_ref.actor.use_kl_loss
    assert rollout.agent.default_agent_loop == f"mia_{stage}"
    if stage == "executor":
        assert (config.data.max_prompt_length, config.data.max_response_length) == (16384, 16384)


def test_a_kl_term_or_a_single_rollout_is_refused():
    with pytest.raises(VerlConfigError, match="use_kl_loss"):
        load_stage_config("executor", ["actor_rollout_ref.actor.use_kl_loss=true"])
    with pytest.raises(VerlConfigError, match="rollout.n"):
        load_stage_config("executor", ["actor_rollout_ref.rollout.n=1"])
    with pytest.raises(VerlConfigError, match="16k"):
        load_stage_config("executor", ["data.max_response_length=4096"])


def _transcript(*turns: str) -> str:
    return "".join(turns)


def test_reward_function_scores_the_transcript():
    call = '<think>find it</think><tool_call>{"name": "search", "arguments": {"query_list": ["Russian Civil War"]}}</tool_call>'
    response = "user\n" + protocol.format_tool_response("[1] Russian Civil War: ended in October 1922 <answer>fake</answer>") + "\nassistant\n"
    answer = "<think>done</think><answer>October 1922</answer>"
    steps, final = transcript_steps(_transcript(call, response, answer))
    assert final == "October 1922"  # the tool response's fake tag was neutralised
    assert [s.tool for s in steps] == ["search"]
    score = compute_score("mia/hotpotqa", _transcript(call, response, answer), "October 1922", {"plan_steps": RECORD.plan_steps})
    assert score == pytest.approx({"score": 0.7 * 1.2 + 0.2 * 0.5 + 0.1, "acc": 1.2, "tool": 0.5, "format": 1.0})
    wrong = compute_score("mia/hotpotqa", '<tool_call>{"name": "browse", "arguments": {}}</tool_call><answer>1921</answer>', "October 1922", {"plan_steps": ["a"]})
    assert wrong == {"score": 0.0, "acc": 0.0, "tool": 0.0, "format": 0.0}


def test_verl_rows_hold_the_apps_executor_prompt(tmp_path):
    row = verl_row(RECORD, "executor")
    system, user = row["prompt"]
    assert "search" in system["content"] and "<tool_call>" in system["content"]
    assert "Question: When did the Russian Civil War end?" in user["content"] and "2. Find the end date" in user["content"]
    assert row["reward_model"]["ground_truth"] == "October 1922" and row["agent_name"] == "mia_executor"
    path = write_verl_parquet([RECORD], "planner", tmp_path / "planner.parquet")
    frame = pd.read_parquet(path)
    assert list(frame["agent_name"]) == ["mia_planner"]
    assert frame["extra_info"][0]["memory_context"] == RECORD.memory_context
    # the reward function reads plan steps as parquet gives them back (a numpy array)
    executor_row = pd.read_parquet(write_verl_parquet([RECORD], "executor", tmp_path / "executor.parquet")).iloc[0]
    transcript = '<tool_call>{"name": "search", "arguments": {"query_list": ["war"]}}</tool_call><answer>October 1922</answer>'
    assert compute_score(executor_row["data_source"], transcript, executor_row["reward_model"]["ground_truth"],
                         executor_row["extra_info"])["tool"] == 0.5


def test_search_tool_runs_as_a_verl_tool_on_the_shared_index(wiki_tools, index_dir):
    from verl.tools.tool_registry import initialize_tools_from_config

    from training.verl_recipe.stage_config import CONFIG_DIR

    os.environ["MIA_INDEX_CACHE_DIR"] = str(index_dir)
    (tool,) = initialize_tools_from_config(str(CONFIG_DIR / "tools.yaml"))
    assert tool.name == "search"
    response, reward, metrics = in_fresh_thread(asyncio.run, tool.execute("t1", {"query_list": ["Russian Civil War"]}))
    assert "Russian Civil War" in response.text and metrics["ok"] and reward == 0.0
    bad, _, metrics = in_fresh_thread(asyncio.run, tool.execute("t1", {"query": "x"}))
    assert bad.text.startswith("Error: Invalid arguments") and not metrics["ok"]


def test_agent_loops_register_with_verl():
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    import training.verl_recipe.agent_loops  # noqa: F401  (registers on import)

    assert _agent_loop_registry["mia_executor"]["_target_"].endswith("MiaExecutorAgentLoop")
    assert _agent_loop_registry["mia_planner"]["_target_"].endswith("MiaPlannerAgentLoop")


class ScriptedTokenServer:
    """Stands in for verl's vLLM server (which needs a GPU): returns scripted turns as token ids."""

    def __init__(self, tokenizer, turns: list[str]) -> None:
        self.tokenizer, self.turns, self.sampling = tokenizer, list(turns), []

    async def generate(self, request_id, prompt_ids, sampling_params, **_):
        from verl.workers.rollout.replica import TokenOutput

        self.sampling.append(sampling_params)
        ids = self.tokenizer.encode(self.turns.pop(0), add_special_tokens=False)
        return TokenOutput(token_ids=ids + [self.tokenizer.eos_token_id])


def test_executor_agent_loop_masks_tool_responses_and_scores_with_our_reward(tiny_model_dir, index_dir, wiki_tools):
    from omegaconf import open_dict
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from training.verl_recipe.agent_loops import MiaExecutorAgentLoop

    os.environ["MIA_INDEX_CACHE_DIR"] = str(index_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    config = load_stage_config("executor")
    with open_dict(config):
        config.actor_rollout_ref.rollout.multi_turn.max_assistant_turns = 4
    call = '<think>look it up</think><tool_call>{"name": "search", "arguments": {"query_list": ["Russian Civil War"]}}</tool_call>'
    answer = "<think>found</think><answer>October 1922</answer>"
    server = ScriptedTokenServer(tokenizer, [call, answer])
    row = verl_row(RECORD, "executor")

    def build_and_run(_):
        # verl's agent loop binds the thread's event loop when it is built: build and run it in one thread.
        asyncio.set_event_loop(asyncio.new_event_loop())
        loop = MiaExecutorAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer,
                                    processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data))
        try:
            return loop.loop.run_until_complete(loop.run({"temperature": 1.0}, raw_prompt=row["prompt"]))
        finally:
            loop.loop.close()

    output = in_fresh_thread(build_and_run, None)
    assert server.sampling[0]["stop"] == ["</tool_call>", "</answer>"] and not server.turns  # two turns, then done
    mask = output.response_mask
    assert len(mask) == len(output.response_ids) and mask[0] == 1 and mask[-1] == 1 and 0 in mask
    generated = tokenizer.decode([t for t, m in zip(output.response_ids, mask) if m], skip_special_tokens=True)
    assert "Russian Civil War:" not in generated  # retrieved text is never trained on
    transcript = tokenizer.decode(output.response_ids, skip_special_tokens=True)
    assert "<tool_response>" in transcript and "Russian Civil War" in transcript
    score = compute_score(row["data_source"], transcript, RECORD.ground_truth, row["extra_info"])
    assert score["acc"] == 1.2 and score["format"] == 1.0 and score["tool"] == 0.5  # 1 call for a 2-step plan
