"""Test-time learning wired into a running app: build the learner from the runtime, and swap a
promoted Planner version into the agent between questions.

Embedded Planner: the new version's adapter is merged into a fresh copy of the base weights and the
agent's planner model is replaced in one assignment; a question already running keeps the model it
started with. Served Planner: the adapter is registered with the server through vLLM's runtime LoRA
endpoint (``POST <base_url>/load_lora_adapter``; start vLLM with ``--enable-lora`` and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``) and the planner then asks for that adapter by name.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import httpx

from backend.config import REPO_ROOT, Config, ConfigError
from backend.episode import EpisodeSettings
from backend.feedback import open_feedback_queue
from backend.llm.base import ChatModel, LLMError
from backend.llm.embedded import EmbeddedChatModel
from backend.llm.gguf_import import prepare_embedded_model
from backend.llm.gguf_lora import write_gguf_adapter
from backend.llm.openai_compat import OpenAIChatModel, ServerRejected
from backend.manager import Manager
from backend.runtime import Runtime, embedded_model_dir, gguf_file, make_chat_model, resolve_path
from backend.tools.base import offered_tools
from training.ttrl.learner import TestTimeLearner
from training.ttrl.memory_fit import MemoryNeed, learner_need, require_memory
from training.ttrl.versions import Version

log = logging.getLogger(__name__)


def learning_root(config: Config) -> Path:
    return config.data_dir / "ttrl"


def planner_weights_source(config: Config) -> Path:
    """Where the weights test-time learning trains come from, before any dequantising: a folder
    (ttrl.base_model_dir, the embedded Planner's) or the llama.cpp Planner's GGUF file."""
    if config.ttrl.base_model_dir:
        return resolve_path(config, config.ttrl.base_model_dir)
    role = config.role("planner")
    if role.backend == "llamacpp":
        return gguf_file(config, role, progress=False)
    if role.backend == "openai":
        raise ConfigError(
            "ttrl.base_model_dir: the Planner is served, so test-time learning needs the served model's weights "
            "on this machine (a transformers folder) to train its LoRA adapter; set ttrl.base_model_dir or ttrl.enabled = false."
        )
    return embedded_model_dir(config, role, progress=False)


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


def gguf_adapter_for(version: Version, base_gguf: Path) -> Path:
    """The version's LoRA as a llama.cpp adapter, converted once next to its peft folder."""
    if version.adapter_path is None or not version.adapter_path.is_dir():
        raise LLMError(f"Planner {version.name} has no adapter folder at {version.adapter_dir!r}; roll back to "
                       "a version whose adapter/ folder exists.")
    target = version.adapter_path.parent / "adapter.gguf"
    if not target.is_file() or target.stat().st_mtime < version.adapter_path.stat().st_mtime:
        write_gguf_adapter(version.adapter_path, base_gguf, target)
    return target


def adapter_digest(adapter_dir: Path) -> str:
    """A short hash of the adapter's files: two different adapters never share a served name."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(adapter_dir).rglob("*") if p.is_file()):
        digest.update(path.relative_to(adapter_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def served_adapter_name(version: Version) -> str:
    """The name the server knows the version by: the version and its content's hash (a version number
    alone repeats after a rollback and is shared by every deployment on one server)."""
    if version.adapter_path is None or not version.adapter_path.is_dir():
        raise LLMError(f"Planner {version.name} has no adapter folder at {version.adapter_dir!r}; roll back to "
                       "a version whose adapter/ folder exists.")
    return f"mia-planner-{version.name}-{adapter_digest(version.adapter_path)}"


def _auth_headers(api_key: str) -> dict:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _served_models(base_url: str, headers: dict, timeout_s: float) -> set[str]:
    response = httpx.get(base_url.rstrip("/") + "/models", headers=headers, timeout=timeout_s)
    response.raise_for_status()
    return {entry.get("id") for entry in response.json().get("data", [])}


def register_served_adapter(base_url: str, version: Version, *, api_key: str = "", timeout_s: float = 60.0) -> str:
    """Load the version's adapter into an OpenAI-compatible server (vLLM's runtime LoRA loading).
    An "already loaded" answer counts only if the server then lists the name among its models."""
    name = served_adapter_name(version)
    headers = _auth_headers(api_key)
    url = base_url.rstrip("/") + "/load_lora_adapter"
    try:
        response = httpx.post(url, json={"lora_name": name, "lora_path": str(version.adapter_path)},
                              headers=headers, timeout=timeout_s)
        if response.status_code == 200:
            return name
        if "already been loaded" in response.text and name in _served_models(base_url, headers, timeout_s):
            return name
    except httpx.HTTPError as exc:
        raise LLMError(f"Could not reach {base_url} to load Planner {version.name}: {exc}.") from None
    raise LLMError(
        f"{url} refused Planner {version.name} ({response.status_code}: {response.text[:200]}). "
        "Start vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True."
    )


class ServedAdapterPlanner(OpenAIChatModel):
    """A served Planner version: when the server has lost the adapter (it restarted), the adapter is
    registered again and the call retried once."""

    def __init__(self, role, version: Version) -> None:
        self._role, self._version = role, version
        name = register_served_adapter(role.base_url, version, api_key=role.api_key, timeout_s=role.timeout_s)
        super().__init__(role.base_url, name, api_key=role.api_key or None, timeout_s=role.timeout_s,
                         supports_images=role.supports_images)

    def _post(self, path: str, body: dict, *, root: bool = False) -> dict:
        try:
            return super()._post(path, body, root=root)
        except ServerRejected:
            try:
                listed = self.model in _served_models(self.base_url, _auth_headers(self._role.api_key), self.timeout_s)
            except httpx.HTTPError:
                raise LLMError(f"The server at {self.base_url} refused Planner {self.model} and lists no models; "
                               "check that it is running with --enable-lora.") from None
            if listed:
                raise  # the adapter is there: the request itself was refused
            log.warning("The server at %s lost Planner %s; registering it again", self.base_url, self.model)
            register_served_adapter(self._role.base_url, self._version, api_key=self._role.api_key,
                                    timeout_s=self._role.timeout_s)
            return super()._post(path, body, root=root)


def planner_model_for(config: Config, version: Version) -> ChatModel:
    """The chat model the app's Planner should use for `version`."""
    role = config.role("planner")
    if version.adapter_path is None:  # the base Planner, as the one factory builds it
        return make_chat_model(config, "planner", progress=False)
    if role.backend == "llamacpp":
        base_model = make_chat_model(config, "planner", progress=False)
        adapter = gguf_adapter_for(version, gguf_file(config, role, progress=False))
        return base_model.with_adapter(adapter, name=f"{base_model.name}+{version.name}")
    if role.backend == "embedded":
        return EmbeddedChatModel(planner_base_dir(config), adapter_dir=version.adapter_path)
    return ServedAdapterPlanner(role, version)


def swap_planner(runtime: Runtime, version: Version) -> None:
    """Between questions: runs in progress hold their own reference to the old model."""
    runtime.agent.models["planner"] = planner_model_for(runtime.config, version)
    log.info("Planner %s is now answering", version.name)


def prepare_for_apps(config: Config, version: Version) -> None:
    """A worker's promotion: make the version ready for the app processes to load between questions
    (a llama.cpp adapter converted once; a served adapter registered with vLLM under its unique name)."""
    role = config.role("planner")
    if version.adapter_path is None:
        return
    if role.backend == "llamacpp":
        gguf_adapter_for(version, gguf_file(config, role, progress=False))
    elif role.backend == "openai":
        register_served_adapter(role.base_url, version, api_key=role.api_key, timeout_s=role.timeout_s)
    log.info("Planner %s is promoted; the app processes load it before their next question", version.name)


def build_learner(runtime: Runtime, *, serving: bool = True, gate=None, owner: str | None = None) -> TestTimeLearner:
    """The learner on the runtime's models, tools and memory. `serving`: in the app's process, a
    promoted version is swapped into this runtime's agent; otherwise (the worker) it is prepared for
    the app processes, which load it themselves. `gate`: see training.ttrl.gate."""
    config = runtime.config
    agent = runtime.agent
    # A llama.cpp Planner's transformers copy is dequantised when learning first trains, not at start.
    lazy = config.role("planner").backend == "llamacpp" and not config.ttrl.base_model_dir
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
    )
    current = learner.versions.current()
    if current.number and serving:
        swap_planner(runtime, current)  # a restart answers with the version that was current
    return learner
