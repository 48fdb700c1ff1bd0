"""Test-time learning on the tiny random model, the real wiki index and a real SQLite memory store."""

from __future__ import annotations

import http.server
import json
import threading
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
import torch

from backend.config import LearningConfig, RoleConfig, load_config
from backend.episode import EpisodeSettings
from backend.feedback import FeedbackItem, FeedbackQueue
from backend.manager import Manager
from training.episode import Episode
from training.rewards import Reward
from training.ttrl import Signal, SignalError, TestTimeLearner, signal_from_feedback
from training.ttrl.budget import RolloutBudget
from training.ttrl.rollouts import ScoredRollout, consolidate, shortest_correct_and_one_incorrect
from training.ttrl.signals import SignalGrader
from training.ttrl.version_folder import REJECTED, Version
from training.ttrl.versions import VersionError, VersionStore

from tests.training.conftest import CANARY, QUESTIONS


def settings(**overrides) -> LearningConfig:
    # float32: the tiny model's draws under the tests' seeds are what the expected versions were written against.
    base = dict(enabled=True, rollouts_per_signal=2, signals_per_update=2, rollouts_per_hour=100, canary_size=1,
                max_turns=1, max_new_tokens=16, poll_seconds=0.05, lora_r=4, lora_alpha=8, weights_dtype="float32")
    return LearningConfig(**{**base, **overrides})


@pytest.fixture
def store(tmp_path, embedder):
    from memory_db import MemoryStore

    s = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    yield s
    s.close()


@pytest.fixture(scope="module")
def tiny_model(tiny_model_dir):
    from backend.llm.embedded import EmbeddedChatModel

    return EmbeddedChatModel(tiny_model_dir)


@pytest.fixture
def make_learner(tmp_path, tiny_model_dir, tiny_model, wiki_tools, store):
    def make(**overrides) -> TestTimeLearner:
        """`plan_shape`: the shape of plan the Planner writes (the app's agent.plan_shape; default its default);
        `executor_model`: the frozen Executor (default the tiny model); `root`: the learning folder."""
        promotions = overrides.pop("promotions", None)
        queue = overrides.pop("queue", None)
        shape = overrides.pop("plan_shape", None)
        app_settings = overrides.pop("app_settings", EpisodeSettings(guided=True, plan_shape=shape) if shape else None)
        executor = overrides.pop("executor_model", tiny_model)
        root = overrides.pop("root", tmp_path / "ttrl")
        return TestTimeLearner(
            settings(**overrides), root=root, planner_base_dir=tiny_model_dir,
            executor_model=executor, judge_model=tiny_model, manager=Manager(tiny_model, store),
            tools=wiki_tools, canary_path=CANARY, feedback_queue=queue,
            on_promote=promotions.append if promotions is not None else None, guided=True,
            app_settings=app_settings,
        )

    return make


def feedback(**fields) -> FeedbackItem:
    base = dict(run_id="r1", namespace="alice", user="alice", question="Q?", answer="Paris", thumbs=None,
                right_answer=None, comment=None, label_before="incorrect", label_after="incorrect",
                judge_method="x", memory_id=None)
    return FeedbackItem(**{**base, **fields})


# -- signals, budget, versions -------------------------------------------------------------------

def test_feedback_becomes_the_signal_a_person_meant():
    typed = signal_from_feedback(feedback(right_answer="Lyon", thumbs="down"))
    assert (typed.kind, typed.answer, typed.namespace) == ("ground_truth", "Lyon", "alice")
    up = signal_from_feedback(feedback(thumbs="up"))
    assert (up.kind, up.answer) == ("ground_truth", "Paris")
    down = signal_from_feedback(feedback(thumbs="down"))
    assert (down.kind, down.answer, down.source, down.memory_id) == ("rejected", "Paris", "feedback:r1", "")
    assert signal_from_feedback(feedback(thumbs="up", memory_id="m-7")).memory_id == "m-7"
    assert signal_from_feedback(feedback(comment="nice")) is None
    with pytest.raises(SignalError, match="needs the answer"):
        Signal("Q?", "ground_truth", answer=" ")


def test_a_queued_signal_learns_in_its_rows_namespace_or_is_refused():
    from datetime import datetime, timezone

    from memory_db import QueueEntry
    from training.ttrl.signals import signal_of_entry

    def entry(**item):
        base = {"question": "Q?", "kind": "ground_truth", "answer": "A", "source": "ground_truth:r1"}
        return QueueEntry(5, "k", "alice", "signal", "r1", {**base, **item}, datetime.now(timezone.utc), None, None)

    assert signal_of_entry(entry()).namespace == "alice"  # not "default": the row's namespace
    assert signal_of_entry(entry(at="2025-01-02T00:00:00+00:00")).at == 1735776000.0
    with pytest.raises(ValueError, match="entry 5, 'namespace' is not its row's namespace"):
        signal_of_entry(entry(namespace="bob"))
    with pytest.raises(ValueError, match="entry 5, 'question' is 4,001 characters, over the 4,000 allowed"):
        signal_of_entry(entry(question="q" * 4001))
    with pytest.raises(SignalError, match="entry 5: a ground_truth signal needs the answer"):
        signal_of_entry(entry(answer=" "))
    with pytest.raises(SignalError, match="are text"):
        Signal(123, "ground_truth", answer="A")


def test_a_rejected_answer_is_graded_wrong_and_a_gold_one_right(tiny_model):
    rejected = SignalGrader(Signal("Capital of France?", "rejected", answer="Lyon"), _judge(tiny_model))
    assert rejected.correct("Capital of France?", " lyon. ") is False
    gold = SignalGrader(Signal("Capital of France?", "ground_truth", answer="Paris"), None)
    assert gold.correct("Capital of France?", "It is Paris.") is True
    assert gold.correct("Capital of France?", "Lyon") is False
    assert gold.correct("Capital of France?", "") is False


def test_a_signals_grader_grades_an_answer_once(tiny_model):
    from tests.counting_model import Counting

    counting = Counting(tiny_model)
    grader = SignalGrader(Signal("Capital of France?", "rejected", answer="Lyon"), _judge(counting))
    first = grader.correct("Capital of France?", "Marseille")
    calls = counting.calls
    assert calls >= 1  # the Judge's model read it
    assert grader.correct("Capital of France?", "Marseille") == first and counting.calls == calls
    grader.correct("Capital of France?", "Nice")
    assert counting.calls > calls


def _judge(model):
    from backend.judge import Judge

    return Judge(model)


def test_budget_is_a_sliding_hour():
    now = [1000.0]
    budget = RolloutBudget(4, clock=lambda: now[0])
    assert budget.allows(4)
    budget.spend(4)
    assert not budget.allows(1) and budget.left() == 0
    assert budget.seconds_until(2) == pytest.approx(3600.0)
    now[0] += 3601
    assert budget.allows(4) and budget.seconds_until(4) == 0.0


def _staged_adapter(store: VersionStore, text: str) -> Path:
    from safetensors.torch import save_file

    staged = store.staging_dir()
    (staged / "adapter").mkdir()
    (staged / "adapter" / "adapter_config.json").write_text(json.dumps({"text": text}))
    save_file({"lora_A": torch.zeros(2)}, staged / "adapter" / "adapter_model.safetensors")  # whole: a version that loads
    (staged / "adapter.gguf").write_text(f"{text} for llama.cpp")  # a conversion made for the canary moves along
    return staged


def test_versions_pointer_and_rules(tmp_path):
    store = VersionStore(tmp_path)
    assert [v.number for v in store.all()] == [0] and store.current().number == 0
    first = store.add(_staged_adapter(store, "first"), Version(0, canary_reward=0.2), make_current=True)
    assert first.number == 1 and store.current().number == 1
    assert json.loads((Path(first.adapter_dir) / "adapter_config.json").read_text()) == {"text": "first"}
    assert (Path(first.adapter_dir).parent / "adapter.gguf").read_text() == "first for llama.cpp"
    (tmp_path / "versions" / "v0002" / "adapter").mkdir(parents=True)  # left by a crash: skipped
    rejected = store.add(_staged_adapter(store, "worse"), Version(0, status=REJECTED), make_current=False)
    assert rejected.number == 3 and store.current().number == 1
    assert not any((tmp_path / "staging").iterdir())  # each staged adapter moved into its version
    with pytest.raises(VersionError, match="rejected"):
        store.make_current(rejected.number)
    with pytest.raises(VersionError, match="no Planner version 9"):
        store.make_current(9)
    store.make_current(0)
    assert VersionStore(tmp_path).current().number == 0  # the pointer is on disk
    assert not [p.name for p in tmp_path.glob(".*.tmp")]  # every write renamed its own temporary file


# -- the non-parametric side ----------------------------------------------------------------------

def _rollout(answer: str, correct: bool, steps: int) -> ScoredRollout:
    from backend.executor import Step

    episode = Episode(question="Q?", ground_truth="gold", plan_steps=["Search for x."], plan_texts=["1. Search for x."],
                      plans_recovered=[False], first_answer=answer, answer=answer, replanned=False,
                      correct_first=correct, correct_final=correct,
                      steps=[Step(turn=i, tool="search") for i in range(steps)], trace_text=f"{steps} steps -> {answer}")
    return ScoredRollout(episode, [], Reward(0.7 * correct, {}))


def test_consolidation_stores_exactly_the_shortest_correct_and_one_incorrect(tiny_model, store):
    rollouts = [_rollout("wrong A", False, 1), _rollout("gold long", True, 3), _rollout("gold short", True, 1),
                _rollout("wrong B", False, 2)]
    chosen = shortest_correct_and_one_incorrect(rollouts)
    assert [r.episode.answer for r in chosen] == ["gold short", "wrong A"]

    used = store.add(_new_memory("earlier question", "alice")).id
    signal = Signal("Q?", "ground_truth", "alice", "gold", "stream:1")
    stored = consolidate(signal, rollouts, manager=Manager(tiny_model, store), memories_used=[used], version="v0000")
    assert len(stored) == 2 and store.count(namespace="alice") == 3
    memories = [store.get(i, namespace="alice") for i in stored]
    assert [(m.correct, m.provenance["answer"]) for m in memories] == [(True, "gold short"), (False, "wrong A")]
    assert all(m.provenance["origin"] == "test-time learning" for m in memories)
    credited = store.get(used, namespace="alice")
    assert (credited.usage_count, credited.success_count) == (2, 2)  # new = 1 of 1; 2 of 4 correct: majority = success
    assert store.count(namespace="bob") == 0


def _new_memory(question: str, namespace: str):
    from memory_db import NewMemory

    return NewMemory(question=question, summary="Search both, compare.", plan="1. Search.", correct=True,
                     namespace=namespace)


# -- the learner ----------------------------------------------------------------------------------

def learn_with_spread(learner: TestTimeLearner, signals: list[tuple[str, str]]):
    """Process the signals, give each group a reward spread (the tiny model's rewards are mostly alike), update."""
    for question, answer in signals:
        learner.submit(Signal(question, "ground_truth", "alice", answer, "stream"))
    for _ in signals:
        assert learner.work_once() == "processed"
    assert learner.status().pending == 0
    for group in learner.batch:
        group.rewards = [0.75] + [0.05] * (len(group.rewards) - 1)
    return learner.update()


def test_signals_make_memories_then_a_version_that_the_canary_promotes(make_learner, store):
    promotions: list[Version] = []
    learner = make_learner(promotions=promotions, signals_per_update=5)
    first = learn_with_spread(learner, QUESTIONS[:2])
    versions = learner.versions.all()
    assert [v.number for v in versions] == [0, 1]
    base = versions[0]
    assert base.canary_reward is not None and first.canary_reward is not None
    assert first.status == "promoted" and first.parent == 0 and first.rollouts == 4 and first.signals == 2
    assert (Path(first.adapter_dir) / "adapter_config.json").is_file()
    assert learner.versions.current().number == 1 and [p.number for p in promotions] == [1]
    assert learner.status().batch == 0 and learner.status().pending == 0
    assert store.count(namespace="alice") >= 2  # at least one trajectory per question
    logged = learner.read_log("signals.jsonl")
    assert [len(s["rewards"]) for s in logged] == [2, 2]


def test_a_batch_without_reward_spread_makes_no_version(make_learner):
    learner = make_learner(signals_per_update=5)
    learner.submit(Signal(QUESTIONS[0][0], "ground_truth", "alice", QUESTIONS[0][1], "stream"))
    learner.work_once()
    learner.batch[0].rewards = [0.05, 0.05]
    assert learner.update() is None
    assert [v.number for v in learner.versions.all()] == [0] and learner.status().batch == 0
    assert learner.read_log("updates.jsonl")[-1]["event"] == "skipped"


def test_a_worse_canary_rejects_the_version_and_restores_the_weights(make_learner):
    from safetensors.torch import load_file

    learner = make_learner(signals_per_update=5)
    base = learner.versions.get(0)
    base.canary_reward = 5.0  # no version can reach it
    learner.versions.record(base)
    learner.submit(Signal(QUESTIONS[0][0], "ground_truth", "alice", QUESTIONS[0][1], "stream"))
    assert learner.work_once() == "processed"
    learner.batch[0].rewards = [1.0, 0.0]  # a spread, so the GRPO step moves the weights
    before = {k: v.clone() for k, v in learner.policy().trainable_state().items()}
    version = learner.update()
    assert version.number == 1 and version.status == REJECTED and version.parent_canary_reward == 5.0
    assert learner.versions.current().number == 0
    saved = load_file(str(Path(version.adapter_dir) / "adapter_model.safetensors"))
    assert any(not torch.equal(saved[k], before_value) for k, before_value in _by_saved_name(before, saved).items())
    after = learner.policy().trainable_state()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_version_planning_the_canary_as_before_reuses_its_executor_turns(make_learner, tiny_model):
    from tests.counting_model import Counting

    counted = Counting(tiny_model)
    learner = make_learner(canary_size=2, executor_model=counted)
    version = learner.versions.get(0)
    first = learner._canary(learner.policy(), version)
    calls = counted.calls
    assert calls >= 2  # each canary question ran the Executor
    again = learner._canary(learner.policy(), version)  # the same weights write the same (greedy) plans
    assert counted.calls == calls and learner._canary_executor.hits >= calls
    assert (again.reward, again.correct, again.questions) == (first.reward, first.correct, first.questions)


def _by_saved_name(state: dict, saved: dict) -> dict:
    """peft saves `...lora_A.weight` for the live `...lora_A.default.weight`."""
    out = {}
    for name, value in state.items():
        key = name.replace(".default", "")
        if key in saved:
            out[key] = value
    assert out, "no trainable tensor matched the saved adapter"
    return out


def test_rollback_points_app_and_learner_at_an_earlier_version(make_learner):
    promotions: list[Version] = []
    learner = make_learner(signals_per_update=5, promotions=promotions)
    learn_with_spread(learner, QUESTIONS[1:2])
    assert learner.versions.current().number == 1
    learner.rollback(0)
    assert learner.versions.current().number == 0 and promotions[-1].number == 0
    assert learner._policy is None  # the next rollout reloads the base weights


def test_paused_learning_changes_nothing(make_learner, store, tmp_path):
    queue = FeedbackQueue(store)
    learner = make_learner(queue=queue)
    learner.pause()
    queue.append(feedback(question=QUESTIONS[0][0], right_answer=QUESTIONS[0][1]))
    learner.submit(Signal(QUESTIONS[1][0], "ground_truth", "alice", QUESTIONS[1][1], "stream"))
    assert learner.work_once() == "paused"
    assert learner.status().pending == 1 and queue.untaken_count() == 1
    assert store.count(namespace="alice") == 0 and [v.number for v in learner.versions.all()] == [0]
    state = json.loads((tmp_path / "ttrl" / "state.json").read_text())
    assert state["paused"] is True
    learner.resume()
    assert learner.work_once() == "processed"  # the queued feedback was read, then one signal processed
    assert queue.untaken_count() == 0 and learner.status().pending == 1


def test_budget_holds_signals_back(make_learner):
    learner = make_learner(rollouts_per_hour=2, signals_per_update=5)
    for question, answer in QUESTIONS[:2]:
        learner.submit(Signal(question, "ground_truth", "alice", answer, "stream"))
    assert learner.work_once() == "processed"
    assert learner.work_once() == "budget" and "budget" in learner.status().activity
    assert learner.status().pending == 1


def test_a_signal_waits_while_memory_is_short_and_is_learned_once_it_is_free(make_learner, monkeypatch):
    from training.ttrl import memory_fit

    learner = make_learner()
    learner.submit(Signal(QUESTIONS[0][0], "ground_truth", "alice", QUESTIONS[0][1], "stream"))
    monkeypatch.setattr(memory_fit, "free_memory_bytes", lambda root=None: 1)  # a machine with no memory free
    assert learner.work_once() == "memory"
    status = learner.status()
    assert status.pending == 1 and "Test-time learning needs" in status.last_error and "The signal waits" in status.last_error
    monkeypatch.undo()
    assert learner.work_once() == "processed" and learner.status().pending == 0


def test_pending_signals_and_the_batch_survive_a_restart(make_learner):
    learner = make_learner(signals_per_update=3)
    for question, answer in QUESTIONS[:2]:
        learner.submit(Signal(question, "ground_truth", "alice", answer, "stream"))
    learner.work_once()
    again = make_learner(signals_per_update=3)
    assert again.status().pending == 1 and again.status().batch == 1
    assert len(again.batch[0].episodes()) == 2


@pytest.mark.timeout(600)  # its own bounds: 240 s for the updates, then 120 s for the learner to stop
def test_an_update_runs_while_questions_are_answered(tmp_path, tiny_model_dir, wiki_tools, embedder):
    """The live app: feedback -> background learner -> promoted version swapped in; answering never waits.
    Plans of steps: the random model's decompositions are never readable, so under sub-questions its
    rollouts all earn one reward and no update is made (an update with no advantage is skipped)."""
    from backend.agent import ResearchAgent, RunRequest
    from backend.events import RunFinished
    from backend.runlog import RunLog
    from backend.runtime import Runtime, make_chat_model
    from memory_db import MemoryStore
    from training.ttrl.live import build_learner

    base = load_config(environ={})
    role = RoleConfig(backend="embedded", model_dir=str(tiny_model_dir), max_new_tokens=16)
    config = replace(base, data_dir=tmp_path, memory_url=f"sqlite:///{tmp_path / 'memory.sqlite'}",
                     agent=replace(base.agent, max_turns=1, reflections=1, plan_shape="steps"), roles={n: role for n in base.roles},
                     # Every version passes the canary, so the swap into the app is certain (the canary rule has its own tests).
                     ttrl=settings(signals_per_update=1, rollouts_per_signal=2, canary_tolerance=10.0))
    models = {name: make_chat_model(config, name, progress=False) for name in config.roles}
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    agent = ResearchAgent(config, models=models, tools=wiki_tools, store=store, runlog=RunLog(config.runs_dir))
    runtime = Runtime(config=config, agent=agent, store=store, runlog=agent.runlog)
    learner = build_learner(runtime)
    original_planner = agent.models["planner"]
    torch.manual_seed(1)  # the app answers greedily, so only the learner's sampling draws from this
    for question, answer in QUESTIONS:
        learner.submit(Signal(question, "ground_truth", "default", answer, "stream"))
    answered_while_busy, answered = 0, 0
    learner.start()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            events = list(agent.run(RunRequest("Who wrote Kiss and Tell?", namespace="bob")))
            assert isinstance(events[-1], RunFinished)
            answered += 1
            status = learner.status()
            answered_while_busy += status.activity != "idle"
            if len(status.versions) >= 3 and status.pending == 0:
                break
    finally:
        learner.stop(timeout=120)
        store.close()
    assert answered_while_busy >= 1, "no question finished while the learner was working"
    versions = learner.versions.all()
    assert len(versions) >= 3, f"{len(versions)} versions and {learner.status().pending} signals pending after 240 s"
    current = learner.versions.current()
    assert current.number == versions[-1].number  # every update was promoted
    assert agent.models["planner"] is not original_planner
    assert current.name in agent.models["planner"].name
    assert store_is_untouched_by_bob(tmp_path, embedder)


def store_is_untouched_by_bob(tmp_path, embedder) -> bool:
    """Learning from `default`'s signals writes only into `default`; bob's namespace holds his own runs."""
    from memory_db import MemoryStore

    s = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    try:
        bob = s.list(namespace="bob")
        return all(m.provenance.get("origin") != "test-time learning" for m in bob)
    finally:
        s.close()


# -- served Planner: the adapter goes to the server's runtime LoRA endpoint ---------------------------

def test_a_served_planner_loads_the_new_adapter_by_name(tmp_path, tiny_model_dir, tiny_model):
    from backend.llm.base import LLMError
    from backend.llm.openai_compat import OpenAIChatModel
    from backend.llm.serve import start_server_in_thread
    from training.policy import LoraSettings, PolicyChatModel
    from backend.llm.adapters import ServedAdapterModel, register_served_adapter, served_adapter_name

    policy = PolicyChatModel(tiny_model_dir, lora=LoraSettings(r=4, alpha=8))
    with torch.no_grad():  # a non-zero adapter, so the served answer can differ from the base model's
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    adapter = policy.save_adapter(tmp_path / "versions" / "v0001" / "adapter")
    version = Version(1, adapter_dir=str(adapter))
    base_url, stop = start_server_in_thread(tiny_model, served_model_name="tiny")
    try:
        name = register_served_adapter(base_url, version)
        assert name == served_adapter_name(version) and name.startswith("mia-planner-v0001-")
        assert register_served_adapter(base_url, version) == name  # loading twice is not an error
        messages = [{"role": "user", "content": "Plan a search about magazines."}]
        tuned = OpenAIChatModel(base_url, name).generate(messages, max_new_tokens=8).text
        base = OpenAIChatModel(base_url, "tiny").generate(messages, max_new_tokens=8).text
        assert tuned != base
        with pytest.raises(LLMError, match="no adapter folder"):
            register_served_adapter(base_url, Version(2, adapter_dir=str(tmp_path / "missing")))
        # Another adapter under the same version number (a rollback, another deployment) gets another name.
        with torch.no_grad():
            for param_name, p in policy.model.named_parameters():
                if "lora_B" in param_name:
                    p.normal_(0, 0.5)
        other = Version(1, adapter_dir=str(policy.save_adapter(tmp_path / "other" / "v0001" / "adapter")))
        assert served_adapter_name(other) != name

        # The server restarts and forgets the adapter: the Planner registers it again and answers.
        planner = ServedAdapterModel(RoleConfig(backend="openai", base_url=base_url, model="tiny"), version)
        assert planner.generate(messages, max_new_tokens=8).text == tuned
        assert httpx.post(base_url + "/unload_lora_adapter", json={"lora_name": name}).status_code == 200
        assert planner.generate(messages, max_new_tokens=8).text == tuned
    finally:
        stop()


def test_an_already_loaded_answer_for_a_name_the_server_does_not_list_is_an_error(tmp_path, tiny_model):
    from backend.llm.base import LLMError
    from backend.llm.adapters import register_served_adapter, served_adapter_name

    adapter = tmp_path / "v0003" / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text("{}")
    version = Version(3, adapter_dir=str(adapter))
    name = served_adapter_name(version)

    class LyingServer(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.send_response(400)
            self.end_headers()
            self.wfile.write(f"The lora adapter '{name}' has already been loaded.".encode())

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"data": [{"id": "base"}]}).encode())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), LyingServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(LLMError, match="refused Planner v0003"):
            register_served_adapter(f"http://127.0.0.1:{server.server_port}/v1", version)
    finally:
        server.shutdown()


def test_learning_settings_are_validated_with_the_key_named(tmp_path):
    from backend.config import ConfigError

    bad = tmp_path / "mia.toml"
    bad.write_text("[ttrl]\nrollouts_per_signal = 1\n")
    with pytest.raises(ConfigError, match="ttrl.rollouts_per_signal"):
        load_config(bad, environ={})
    assert load_config(bad, environ={"MIA_TTRL_ROLLOUTS_PER_SIGNAL": "3"}).ttrl.rollouts_per_signal == 3
    bad.write_text("[ttrl]\nrollouts_per_hour = 2\n")
    with pytest.raises(ConfigError, match="ttrl.rollouts_per_hour"):
        load_config(bad, environ={})


def test_a_folder_that_is_not_an_adapter_is_refused_clearly(tmp_path, tiny_model_dir):
    from backend.llm.base import LLMError
    from backend.llm.embedded import EmbeddedChatModel

    with pytest.raises(LLMError, match="not a LoRA adapter folder"):
        EmbeddedChatModel(tiny_model_dir, adapter_dir=tmp_path)


def test_a_failing_update_pauses_learning_with_the_reason(make_learner, tmp_path, monkeypatch):
    learner = make_learner(signals_per_update=2)
    learner.submit(Signal(QUESTIONS[0][0], "ground_truth", "alice", QUESTIONS[0][1], "stream"))
    assert learner.work_once() == "processed"
    learner.batch[0].rewards = [0.75, 0.05]

    def disk_full(target):  # a full disk cannot be produced for real in a test
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(learner.policy(), "save_adapter", disk_full)
    learner.submit(Signal(QUESTIONS[1][0], "ground_truth", "alice", QUESTIONS[1][1], "stream"))
    assert learner.work_once() == "processed"
    status = learner.status()
    assert status.paused and "learning is paused" in status.last_error and "No space left" in status.last_error
    assert learner.work_once() == "paused"
    assert [v.number for v in learner.versions.all()] == [0]  # no version, and no staged adapter left behind
    assert not any((tmp_path / "ttrl" / "staging").iterdir())


# -- llama.cpp Planner: the LoRA is trained on a transformers copy and applied as a GGUF adapter ------

@pytest.mark.timeout(600)  # the first test of a session to use the real model prepares it from its wheels
@pytest.mark.slow
def test_a_llamacpp_planner_answers_with_its_promoted_adapter(tmp_path, _smollm2_prepared, wiki_tools, embedder):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from backend.agent import ResearchAgent
    from backend.llm.gguf_import import default_gguf_path
    from backend.llm.llamacpp import LlamaCppChatModel
    from backend.runlog import RunLog
    from backend.runtime import Runtime, make_chat_model
    from memory_db import MemoryStore
    from training.ttrl.live import build_learner, planner_model_for

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / _smollm2_prepared.name).symlink_to(_smollm2_prepared)  # dequantised once per cache
    base = load_config(environ={})
    role = RoleConfig(backend="llamacpp", model_file=str(default_gguf_path()), context_tokens=1024, slots=1,
                      max_new_tokens=24)
    config = replace(base, data_dir=tmp_path, memory_url=f"sqlite:///{tmp_path / 'memory.sqlite'}",
                     roles={n: role for n in base.roles}, ttrl=settings())
    models = {name: make_chat_model(config, name, progress=False) for name in config.roles}
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    agent = ResearchAgent(config, models=models, tools=wiki_tools, store=store, runlog=RunLog(config.runs_dir))
    learner = build_learner(Runtime(config=config, agent=agent, store=store, runlog=agent.runlog))
    try:
        # The learner trains the transformers copy of the very GGUF the Planner answers with.
        assert learner.planner_base_dir().resolve() == _smollm2_prepared.resolve()
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(_smollm2_prepared, dtype=torch.float32)
        peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                      init_lora_weights=False))
        adapter_dir = tmp_path / "ttrl" / "versions" / "v0001" / "adapter"
        peft_model.save_pretrained(adapter_dir)
        version = Version(number=1, adapter_dir=str(adapter_dir))
        planner = planner_model_for(config, version)
        assert isinstance(planner, LlamaCppChatModel)
        assert planner.name == f"{models['planner'].name}+v0001"
        assert planner.adapter_path == adapter_dir.parent / "adapter.gguf" and planner.adapter_path.is_file()
        messages = [{"role": "user", "content": "Plan research for: who wrote Kiss and Tell?"}]
        base_text = models["planner"].generate(messages, max_new_tokens=12).text
        assert planner.generate(messages, max_new_tokens=12).text != base_text
        assert models["planner"].generate(messages, max_new_tokens=12).text == base_text  # other roles unchanged
        assert planner_model_for(config, Version(number=0)) is models["planner"]
    finally:
        store.close()


def test_repeated_thumbs_on_one_run_make_one_signal(make_learner, store):
    queue = FeedbackQueue(store)
    learner = make_learner(queue=queue)
    learner.pause()  # read the queue without processing
    for _ in range(4):
        queue.append(feedback(run_id="r1", thumbs="up"))
    queue.append(feedback(run_id="r2", thumbs="down"))
    learner.poll_feedback()
    assert [(s.source, s.kind) for s in learner.pending] == [("feedback:r1", "ground_truth"), ("feedback:r2", "rejected")]
    queue.append(feedback(run_id="r1", right_answer="Lyon"))  # a correction replaces the waiting signal
    learner.poll_feedback()
    assert [(s.source, s.answer) for s in learner.pending] == [("feedback:r1", "Lyon"), ("feedback:r2", "Paris")]
    learner.learned_from["alice|feedback:r2"] = "rejected:Paris"  # as if r2 had been learned from already
    learner.pending.pop()
    queue.append(feedback(run_id="r2", thumbs="down"))
    learner.poll_feedback()
    assert [s.source for s in learner.pending] == ["feedback:r1"]
