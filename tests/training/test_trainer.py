"""Both GRPO stages end to end on the tiny model, the alternation, and the command line."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from backend.llm.embedded import EmbeddedChatModel
from training.__main__ import main
from training.grpo_config import TrainingConfigError, load_settings, settings_from_mapping
from training.trainer import StageTrainer, score_episode

FAST = {
    "model_dir": "tiny-random", "num_questions": 2, "steps": 1, "questions_per_step": 1, "rollouts_per_question": 2,
    "agent": {"max_turns": 1, "reflections": 1},
    "roles": {"executor": {"max_new_tokens": 12}, "planner": {"max_new_tokens": 12}},
    "learning_rate": 1e-3, "lora": {"r": 4, "alpha": 8, "dropout": 0.0},
}


def _settings(tmp_path, **more):
    return settings_from_mapping({**FAST, "output_dir": str(tmp_path / "out"), **more})


@pytest.mark.parametrize("stage", ["executor", "planner"])
def test_one_grpo_step_then_a_checkpoint_the_app_loads(stage, tmp_path, wiki_tools, tiny_model_dir):
    trainer = StageTrainer(stage, _settings(tmp_path), tools=wiki_tools)
    if stage == "executor":
        assert all(r.plan_steps for r in trainer.records)  # plans written by the frozen Planner
    logs = trainer.train(log_path=tmp_path / "log.jsonl")
    (line,) = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert line["stage"] == stage and line["step"] == 1 and 0.0 <= line["mean_reward"] <= 1.04
    assert logs[0].mean_reward == line["mean_reward"]
    episode, samples = trainer.episode(trainer.records[0], record_turns=True)
    assert samples and all(s.completion_ids for s in samples)  # the policy's own decisions were recorded
    reward = score_episode(stage, episode, wiki_tools)
    assert set(reward.parts) == ({"acc", "tool", "format"} if stage == "executor" else {"acc_final", "acc_first", "format", "decision"})
    seen = []
    rewards = trainer.evaluate(trainer.records, rollouts=2, on_rollout=lambda i, j, r, s: seen.append((i, j, r)))
    assert [(i, j) for i, j, _ in seen] == [(i, j) for i in (1, 2) for j in (1, 2)]
    assert [r for _, _, r in seen] == rewards and all(set(r.parts) == set(reward.parts) for r in rewards)
    checkpoint = trainer.save(tmp_path / "ckpt")
    model = EmbeddedChatModel(checkpoint)
    assert model.generate([{"role": "user", "content": "hi"}], max_new_tokens=3).completion_tokens >= 1


def test_settings_errors_name_the_key(tmp_path):
    with pytest.raises(TrainingConfigError, match="rollouts_per_question: must be at least 2"):
        _settings(tmp_path, rollouts_per_question=1)
    with pytest.raises(TrainingConfigError, match="learnig_rate: unknown setting"):
        _settings(tmp_path, learnig_rate=1.0)
    with pytest.raises(TrainingConfigError, match="steps: expected int"):
        _settings(tmp_path, steps="many")
    assert _settings(tmp_path, lora=None).lora is None  # full fine-tuning


def test_cli_reports_bad_config_as_a_sentence(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("judge: oracle\n", encoding="utf-8")
    assert main(["executor", "--config", str(bad)]) == 2
    assert "judge: must be 'exact' or 'model'" in capsys.readouterr().err
    assert main(["planner", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.verl
def test_cli_dataset_and_verl_check(tmp_path, capsys):
    out = tmp_path / "stage2.parquet"
    assert main(["dataset", "--stage", "planner", "--hotpotqa", "data/hotpotqa/dev.jsonl", "--limit", "3", "--verl", "--out", str(out)]) == 0
    assert len(pd.read_parquet(out)) == 3
    assert main(["verl-check", "--stage", "executor"]) == 0
    assert "executor: ok (n=8, lr=1e-06, batch=128" in capsys.readouterr().out


def test_alternation_records_each_round(tmp_path, capsys):
    executor = tmp_path / "executor.yaml"
    planner = tmp_path / "planner.yaml"
    executor.write_text(yaml.safe_dump({**FAST, "num_questions": 1, "output_dir": str(tmp_path / "ex")}), encoding="utf-8")
    planner.write_text(yaml.safe_dump({**FAST, "num_questions": 1, "output_dir": str(tmp_path / "pl")}), encoding="utf-8")
    assert main(["alternate", "--rounds", "1", "--executor-config", str(executor), "--planner-config", str(planner),
                 "--output-dir", str(tmp_path / "alt")]) == 0
    (round_line,) = [json.loads(x) for x in (tmp_path / "alt" / "rounds.jsonl").read_text().splitlines()]
    assert round_line["round"] == 1
    assert round_line["executor_checkpoint"].endswith("executor/executor-final")
    assert round_line["planner_checkpoint"].endswith("planner/planner-final")
    assert (tmp_path / "alt" / "round-1" / "stage1.parquet").is_file()
    assert load_settings(executor).num_questions == 1


def test_guided_executor_turns_record_the_sampled_action_choice(tmp_path, wiki_tools):
    trainer = StageTrainer("executor", _settings(tmp_path, agent={**FAST["agent"], "guided_actions": "on", "plan_shape": "steps"}),
                           tools=wiki_tools)
    assert trainer.episode_settings.guided
    episode, samples = trainer.episode(trainer.records[0], record_turns=True)
    assert any(step.tool == "search" for step in episode.steps)  # guided turns always reach a tool call
    option_lengths = {len(s.completion_ids) for s in samples}
    assert samples and min(option_lengths) <= 3  # the action choice is recorded as its option's few tokens
    with pytest.raises(TrainingConfigError, match='agent.guided_actions: must be "auto", "on" or "off"'):
        _settings(tmp_path, agent={"guided_actions": "yes"})


# -- the plan of sub-questions (agent.plan_shape: subquestions) -----------------------------------

from tests.training.hops_example import DECOMPOSITION, FESTIVAL, HOPS, WORKED  # noqa: E402
HOPS_AGENT = {**FAST["agent"], "plan_shape": "subquestions"}


def _hop_record(**more):
    from training.datasets import RLRecord

    return RLRecord(FESTIVAL, "Great Exuma", "test:festival", **{"plan_text": DECOMPOSITION, "plan_steps": list(HOPS),
                                                                   "plan_shape": "subquestions", **more})


class PromptRecorder:
    """Records every call the policy answers, (kind, messages, prefill), with what it answered, by
    wrapping its stream and choose (generate goes through stream)."""

    def __init__(self, model) -> None:
        import copy

        from backend.llm.base import Completion

        self.calls, self.replies = [], []
        stream, choose = model.stream, model.choose

        def recorded_stream(messages, **kwargs):
            for item in stream(messages, **kwargs):
                if isinstance(item, Completion):
                    self.calls.append(("generate", copy.deepcopy(messages), kwargs.get("prefill", "")))
                    self.replies.append(item)
                yield item

        def recorded_choose(messages, options, **kwargs):
            choice = choose(messages, options, **kwargs)
            self.calls.append(("choose", copy.deepcopy(messages), kwargs.get("prefill", "")))
            self.replies.append(choice)
            return choice

        model.stream, model.choose = recorded_stream, recorded_choose


class ReplayModel:
    """The app's model in the comparison: the policy's traits, answering what the policy answered,
    recording what it is asked."""

    supports_images = False

    def __init__(self, like, replies) -> None:
        self.traits, self.name, self._count = like.traits, "replay", like.count_tokens
        self.replies, self.calls = list(replies), []

    def generate(self, messages, *, prefill="", **_):
        import copy

        self.calls.append(("generate", copy.deepcopy(messages), prefill))
        return self.replies.pop(0)

    def stream(self, messages, **kwargs):
        completion = self.generate(messages, **kwargs)
        yield completion.text
        yield completion

    def choose(self, messages, options, *, prefill=""):
        import copy

        self.calls.append(("choose", copy.deepcopy(messages), prefill))
        return self.replies.pop(0)

    def count_tokens(self, text):
        return self._count(text)


def test_a_hop_settings_trainer_refuses_a_dataset_of_steps(tmp_path, wiki_tools):
    from training.datasets import RLRecord

    with pytest.raises(TrainingConfigError, match="agent.plan_shape is 'subquestions' but a given record holds plans of "
                                                  "shape 'steps'.*--plan-shape subquestions"):
        StageTrainer("executor", _settings(tmp_path, agent=HOPS_AGENT), tools=wiki_tools,
                     records=[RLRecord(FESTIVAL, "Great Exuma", "x", "", "1. Search for it", ["Search for it"])])


def test_stage1_on_sub_questions_researches_the_datasets_hops_as_the_app_researches_its_planners(tmp_path, wiki_tools):
    from backend.events import HopAnswered, PlanReady
    from tests.backend.scripted_model import ScriptedChatModel
    from training.episode import Grader, run_episode

    trainer = StageTrainer("executor", _settings(tmp_path, agent=HOPS_AGENT), tools=wiki_tools, records=[_hop_record()])
    assert trainer.episode_settings.plan_shape == "subquestions"
    logs = trainer.train()
    assert len(logs) == 1 and 0.0 <= logs[0].mean_reward <= 1.04  # one GRPO step on the hops' readings

    recorder = PromptRecorder(trainer.policy)
    episode, samples = trainer.episode(trainer.records[0], record_turns=True)
    assert [e.template for e in episode.events if isinstance(e, HopAnswered)][:2] == HOPS  # hop by hop, as given
    assert episode.plan_steps == HOPS and [h["template"] for h in episode.hops] == HOPS
    assert not any(isinstance(e, PlanReady) and e.revision == 0 for e in episode.events)  # the plan was given
    assert samples and len(samples) == len(recorder.calls)
    # The app: its Planner decomposes the question into the same hops, and its Executor (answering as
    # the policy did) is asked exactly what the policy was asked.
    app_executor = ReplayModel(trainer.policy, recorder.replies)
    app = run_episode(question=FESTIVAL, ground_truth="Great Exuma", planner_model=ScriptedChatModel("planner", [DECOMPOSITION]),
                      executor_model=app_executor, tools=wiki_tools, grader=Grader(),
                      settings=trainer.episode_settings)
    assert app.plan_steps == HOPS and next(e for e in app.events if isinstance(e, PlanReady)).steps == HOPS
    assert app_executor.calls == recorder.calls and not app_executor.replies
    reward = score_episode("executor", episode, wiki_tools)
    hops_searched = sum(1 for step in episode.steps if step.tool == "search")
    assert reward.parts["tool"] == min(hops_searched, len(HOPS)) / len(HOPS)  # the hops are the plan's steps


def test_stage2_on_sub_questions_prompts_the_planner_policy_to_decompose_as_the_app_does(tmp_path, wiki_tools):
    from backend.episode import EpisodeSettings
    from backend.prompts.planner import DECOMPOSE_PREFILL, decompose_messages
    from tests.backend.scripted_model import ScriptedChatModel
    from training.datasets import QuestionItem, stage2_records
    from training.episode import Grader, run_episode

    records = stage2_records([QuestionItem(FESTIVAL, "Great Exuma", "test:festival", WORKED)], "subquestions")
    trainer = StageTrainer("planner", _settings(tmp_path, agent=HOPS_AGENT), tools=wiki_tools, records=records)
    logs = trainer.train()
    assert len(logs) == 1 and set(logs[0].reward_parts) == {"acc_final", "acc_first", "format", "decision"}

    recorder = PromptRecorder(trainer.policy)
    episode, samples = trainer.episode(records[0], record_turns=True)
    # The policy's one decision is the decomposition (reflection on hops is the app's check, not a choice),
    # prompted with the app's prompt strings after the record's worked examples, the prefill sampled after.
    (call,) = recorder.calls
    assert call == ("generate", decompose_messages(FESTIVAL, WORKED), DECOMPOSE_PREFILL)
    assert samples[0].prompt_ids == trainer.policy.prompt_ids(decompose_messages(FESTIVAL, WORKED), DECOMPOSE_PREFILL)
    assert episode.plan_texts[0].startswith(DECOMPOSE_PREFILL) and episode.plan_steps == [h["template"] for h in episode.hops]
    # The app's Planner, given the same worked examples, is asked the same.
    app_planner = ScriptedChatModel("planner", [DECOMPOSITION])
    run_episode(question=FESTIVAL, ground_truth="Great Exuma", planner_model=app_planner,
                executor_model=ScriptedChatModel("executor", ["Fyre Festival", "Great Exuma"]), tools=wiki_tools,
                grader=Grader(), settings=EpisodeSettings(plan_shape="subquestions"), memory_text=WORKED)
    assert app_planner.prompts[0] == call[1]


def test_cli_builds_a_dataset_of_decompositions(tmp_path):
    from training.datasets import read_records

    out = tmp_path / "stage1.parquet"
    assert main(["dataset", "--stage", "executor", "--hotpotqa", "data/hotpotqa/dev.jsonl", "--limit", "1",
                 "--planner-model", "tiny-random", "--plan-shape", "subquestions", "--out", str(out)]) == 0
    (record,) = read_records(out)
    assert record.plan_shape == "subquestions" and record.plan_text.startswith("1.") and record.plan_steps
    assert record.memory_context == ""  # no memories: no worked examples
