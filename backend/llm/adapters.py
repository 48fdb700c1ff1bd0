"""A Planner version's LoRA adapter on each kind of backend: converted once to a llama.cpp adapter
file, or loaded into an OpenAI-compatible server (vLLM's runtime LoRA endpoint,
``POST <base_url>/load_lora_adapter``; start vLLM with ``--enable-lora`` and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``) and asked for by a name unique to its content.

A version is anything with ``name``, ``adapter_dir`` and ``adapter_path`` (training.ttrl.version_folder.Version).
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Protocol

import httpx

from backend.llm.base import LLMError
from backend.llm.gguf_lora import write_gguf_adapter
from backend.llm.openai_compat import OpenAIChatModel, ServerRejected

log = logging.getLogger(__name__)


class AdapterVersion(Protocol):
    name: str
    adapter_dir: str | None

    @property
    def adapter_path(self) -> Path | None: ...


def gguf_adapter_for(version: AdapterVersion, base_gguf: Path) -> Path:
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


def served_adapter_name(version: AdapterVersion) -> str:
    """The name the server knows the version by: the version and its content's hash (a version number
    alone repeats after a rollback and is shared by every deployment on one server)."""
    if version.adapter_path is None or not version.adapter_path.is_dir():
        raise LLMError(f"{_label(version)} has no adapter folder at {version.adapter_dir!r}; roll back to "
                       "a version whose adapter/ folder exists.")
    role = getattr(version, "role", "planner")
    return f"mia-{role}-{version.name}-{adapter_digest(version.adapter_path)}"


def _label(version: AdapterVersion) -> str:
    """How messages name an adapter: "Planner v0003", "Executor reader-2026-12"."""
    return f"{getattr(version, 'role', 'planner').capitalize()} {version.name}"


def _auth_headers(api_key: str) -> dict:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _served_models(base_url: str, headers: dict, timeout_s: float) -> set[str]:
    response = httpx.get(base_url.rstrip("/") + "/models", headers=headers, timeout=timeout_s)
    response.raise_for_status()
    return {entry.get("id") for entry in response.json().get("data", [])}


def register_served_adapter(base_url: str, version: AdapterVersion, *, api_key: str = "", timeout_s: float = 60.0) -> str:
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
        raise LLMError(f"Could not reach {base_url} to load {_label(version)}: {exc}.") from None
    raise LLMError(
        f"{url} refused {_label(version)} ({response.status_code}: {response.text[:200]}). "
        "Start vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True."
    )


class ServedAdapterModel(OpenAIChatModel):
    """A served model answering with a LoRA adapter (a Planner version, the Executor's trained reader):
    when the server has lost the adapter (it restarted), the adapter is registered again and the call
    retried once."""

    def __init__(self, role, version: AdapterVersion) -> None:
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
                raise LLMError(f"The server at {self.base_url} refused {_label(self._version)} and lists no models; "
                               "check that it is running with --enable-lora.") from None
            if listed:
                raise  # the adapter is there: the request itself was refused
            log.warning("The server at %s lost %s; registering it again", self.base_url, _label(self._version))
            register_served_adapter(self._role.base_url, self._version, api_key=self._role.api_key,
                                    timeout_s=self._role.timeout_s)
            return super()._post(path, body, root=root)
