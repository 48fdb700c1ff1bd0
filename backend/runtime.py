"""Building the real parts from the configuration: models, tools, memory store, agent.

First use prepares the embedded model (GGUF -> safetensors cache) and the search index, with
progress bars; later starts load the caches in seconds.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from backend.agent import ResearchAgent
from backend.config import Config
from backend.documents import DocumentLimits, DocumentStore
from backend.llm.base import ChatModel
from backend.llm.registry import backend_spec
from backend.runlog import RunLog
from backend.tools import build_tools
from memory_db import MemoryStore, get_embedder

log = logging.getLogger(__name__)


def make_chat_model(config: Config, role_name: str, *, progress: bool = True) -> ChatModel:
    """The one factory of role models: the app, settings, the learner and the evaluation use it."""
    role = config.role(role_name)
    return backend_spec(role.backend).build(config, role, progress)


@dataclass
class Runtime:
    config: Config
    agent: ResearchAgent
    store: MemoryStore
    runlog: RunLog
    documents: DocumentStore | None = None  # the analysts' own documents, searched beside the wiki

    def close(self) -> None:
        self.store.close()


def document_store(config: Config, embedder=None) -> DocumentStore:
    """The documents of every namespace, under `<data_dir>/documents`, with the app's size limits."""
    limits = DocumentLimits(max_file_bytes=config.app.max_document_bytes,
                            max_namespace_bytes=config.app.max_namespace_document_bytes)
    return DocumentStore(config.data_dir / "documents", embedder=embedder, limits=limits, budget=config.documents)


def build_runtime(config: Config, *, progress: bool = True, dense_in_background: bool = False,
                  with_documents: bool = True) -> Runtime:
    """`dense_in_background`: the app answers with BM25 while the corpus's dense vectors are first
    built (the evaluation and `prepare` wait for them, so every question sees the same search).
    `with_documents`: the search tool reads each caller's own documents (and the shared ones) too."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    models = {role: make_chat_model(config, role, progress=progress) for role in config.roles}
    embedder = get_embedder()
    documents = document_store(config, embedder) if with_documents else None
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    tools = build_tools(
        config.agent.tools,
        cache_dir=config.index_cache_dir,
        web_enabled=config.search.web,
        progress=progress,
        embedder=embedder if config.search.hybrid else None,
        visit_allow_private=config.search.visit_allow_private,
        image_index_dir=config.data_dir / "images" if (config.data_dir / "images").is_dir() else None,
        image_min_similarity=config.agent.caption_min_similarity,
        dense_in_background=dense_in_background,
        documents=documents,
        struck=store.struck_keys,  # each namespace's search leaves out the passages struck there
        guided=config.agent.guided_for(models["executor"].traits),
    )
    runlog = RunLog(config.runs_dir)
    agent = ResearchAgent(config, models=models, tools=tools, store=store, runlog=runlog)
    return Runtime(config=config, agent=agent, store=store, runlog=runlog, documents=documents)
