"""Test-time learning wired into a running app: build the learner from the runtime, and swap a
promoted Planner version into the agent between questions.

Embedded Planner: the new version's adapter is merged into a fresh copy of the base weights and the
agent's planner model is replaced in one assignment; a question already running keeps the model it
started with. Served Planner: the adapter is registered with the server through vLLM's runtime LoRA
endpoint (``POST <base_url>/load_lora_adapter``; start vLLM with ``--enable-lora`` and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``) and the planner then asks for that adapter by name.
"""

from __future__ import annotations

import logging
from pathlib import Path

from backend.config import REPO_ROOT, Config, ConfigError
from backend.episode import EpisodeSettings
from backend.feedback import open_feedback_queue
from backend.llm.base import ChatModel
from backend.llm.gguf_import import prepare_embedded_model
from backend.llm.registry import backend_spec, planner_weights_source
from backend.manager import Manager
from backend.runtime import Runtime, make_chat_model
from backend.tools.base import offered_tools
from training.ttrl.learner import TestTimeLearner
from training.ttrl.memory_fit import MemoryNeed, learner_need, require_memory
from training.ttrl.remote import RemoteLearner
from training.ttrl.supervisor import WorkerSupervisor
from training.ttrl.version_folder import Version

log = logging.getLogger(__name__)


def learning_root(config: Config) -> Path:
    return config.data_dir / "ttrl"


def learner_memory_need(config: Config) -> MemoryNeed:
    """What training the Planner adds to the learner's memory at its peak (training.ttrl.memory_fit)."""
    return learner_need(planner_weights_source(config), config.ttrl.weights_dtype)


def planner_base_dir(config: Config) -> Path:
    """The local weights test-time learning trains: ttrl.base_model_dir, the embedded Planner's, or a
    transformers copy of the llama.cpp Planner's GGUF in ttrl.weights_dtype (dequantised once, on first
    training, and only when training it fits in the free memory: NotEnoughMemory otherwise)."""
    source = planner_weights_source(config)
    if not source.is_file():
        return source
    require_memory(learner_need(source, config.ttrl.weights_dtype))  # before minutes of dequantising
    return prepare_embedded_model(config.model_cache_dir, gguf_path=source, progress=False,
                                  dtype=config.ttrl.weights_dtype, separate_process=True)


def planner_model_for(config: Config, version: Version) -> ChatModel:
    """The chat model the app's Planner should use for `version`."""
    if version.adapter_path is None:  # the base Planner, as the one factory builds it
        return make_chat_model(config, "planner", progress=False)
    role = config.role("planner")
    return backend_spec(role.backend).planner_version(config, role, version)


def swap_planner(runtime: Runtime, version: Version) -> None:
    """Between questions: runs in progress hold their own reference to the old model."""
    runtime.agent.models["planner"] = planner_model_for(runtime.config, version)
    log.info("Planner %s is now answering", version.name)


def worker_handle(runtime: Runtime, *, process: WorkerSupervisor | None = None) -> RemoteLearner:
    """An app process's handle on the deployment's learner worker (`process`: the one this app started;
    None: a worker run elsewhere): promoted Planner versions are swapped in between questions, and a
    running question asks the worker to give way, through the database."""
    config = runtime.config
    return RemoteLearner(config.ttrl, lease=runtime.store.learner_lease(ttl_s=config.ttrl.lease_ttl_s),
                         queue=open_feedback_queue(runtime.store, config.data_dir), root=learning_root(config),
                         on_promote=lambda version: swap_planner(runtime, version), process=process)


def prepare_for_apps(config: Config, version: Version) -> None:
    """A worker's promotion: make the version ready for the app processes to load between questions
    (a llama.cpp adapter converted once; a served adapter registered with vLLM under its unique name)."""
    role = config.role("planner")
    if version.adapter_path is None:
        return
    backend_spec(role.backend).publish_version(config, role, version)
    log.info("Planner %s is promoted; the app processes load it before their next question", version.name)


def fast_sampler_for(config: Config):
    """The Planner's backend's fast sampler (backend.llm.registry) when ttrl.sampler names that backend,
    or is "auto" and the backend has one: the model answering with a Planner version (llama.cpp: its
    adapter converted to GGUF once); None for the trained copy's own sampling."""
    role = config.role("planner")
    spec = backend_spec(role.backend)
    sampler = config.ttrl.sampler
    if sampler == "transformers" or (sampler == "auto" and spec.fast_sampler is None):
        return None
    if sampler != "auto" and sampler != role.backend:
        raise ConfigError(f"ttrl.sampler: \"{sampler}\" samples on the Planner's {sampler} model, but roles.planner "
                          f"runs on {role.backend!r}; set ttrl.sampler = \"transformers\".")
    sample_on = spec.fast_sampler

    def sampler_model(version: Version) -> ChatModel:
        if version.adapter_path is None:  # the base Planner, as the one factory builds it
            return make_chat_model(config, "planner", progress=False)
        return sample_on(config, role, version)

    return sampler_model


def build_learner(runtime: Runtime, *, serving: bool = True, gate=None, owner: str | None = None) -> TestTimeLearner:
    """The learner on the runtime's models, tools and memory. `serving`: in the app's process, a
    promoted version is swapped into this runtime's agent; otherwise (the worker) it is prepared for
    the app processes, which load it themselves. `gate`: see training.ttrl.gate."""
    config = runtime.config
    agent = runtime.agent
    # A llama.cpp Planner's transformers copy is dequantised when learning first trains, not at start.
    lazy = planner_weights_source(config).is_file()
    learner_base = (lambda: planner_base_dir(config)) if lazy else planner_base_dir(config)
    manager = Manager(agent.models["manager"], runtime.store, summary_max_words=config.agent.summary_max_words)
    on_promote = (lambda version: swap_planner(runtime, version)) if serving else (
        lambda version: prepare_for_apps(config, version))
    learner = TestTimeLearner(
        config.ttrl, root=learning_root(config), planner_base_dir=learner_base,
        executor_model=agent.models["executor"], judge_model=agent.models["judge"], manager=manager,
        tools=offered_tools(agent.tools, has_image=False),  # signals are text questions
        canary_path=REPO_ROOT / config.ttrl.canary_file if not Path(config.ttrl.canary_file).is_absolute()
        else Path(config.ttrl.canary_file),
        feedback_queue=open_feedback_queue(runtime.store, config.data_dir),
        on_promote=on_promote,
        app_settings=EpisodeSettings.from_config(config, agent.models["executor"].traits),
        reward_weights=config.rewards.planner,
        gate=gate, owner=owner,
        fast_sampler=fast_sampler_for(config),
    )
    if serving:  # a restart answers with the version that was current (or says why it cannot)
        current = learner.versions.current()
        learner.answering = Version(0, note="base model")
        if current.number:
            learner.answer_with(current)
    return learner
