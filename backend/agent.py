"""The research agent the app serves: validates a question, runs one episode, logs its events.

`ResearchAgent.run` is a generator of typed events (backend.events); the UI, the command line,
the evaluation harness and the tests consume the same stream. The episode itself (caption, memories,
plan, execute, reflect, judge, consolidate) is backend.episode's loop, the one training runs too.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

from backend.config import Config
from backend.episode import EpisodeInput, EpisodeLoop, EpisodeSettings
from backend.events import Event, RunFailed, TextDelta
from backend.inputs import InputError, validate_image, validate_question
from backend.llm.base import ChatModel, LLMError
from backend.methods import METHOD_NAMES, METHODS
from backend.runlog import RunLog
from backend.tools.base import Tool
from memory_db import MemoryStore

log = logging.getLogger(__name__)


@dataclass
class RunRequest:
    """One question; `method` is one of backend.methods.METHODS (the full loop `mia` or a baseline)."""

    question: str
    namespace: str = "default"
    image: str | None = None
    caption: str | None = None  # given by the user
    ground_truth: str | None = None
    method: str = "mia"


class ResearchAgent:
    def __init__(
        self,
        config: Config,
        *,
        models: Mapping[str, ChatModel],
        tools: Mapping[str, Tool],
        store: MemoryStore,
        runlog: RunLog | None = None,
    ) -> None:
        self.config = config
        self.models = dict(models)
        self.tools = dict(tools)
        self.store = store
        self.runlog = runlog

    def run(self, request: RunRequest, stop_requested: Callable[[], bool] | None = None) -> Iterator[Event]:
        """The run's events; `stop_requested` (e.g. a Stop button's event.is_set) ends it early with
        the answer so far, before the next model call."""
        run_id = uuid.uuid4().hex[:12]
        for event in self._run(request, run_id, stop_requested):
            if self.runlog is not None and not isinstance(event, TextDelta):
                self.runlog.append(request.namespace, event)
            yield event

    def _run(self, request: RunRequest, run_id: str, stop_requested: Callable[[], bool] | None) -> Iterator[Event]:
        cfg = self.config
        try:
            if request.method not in METHODS:
                raise InputError(f"Unknown method {request.method!r}; choose one of {', '.join(METHOD_NAMES)}.")
            question = validate_question(request.question, cfg.agent.max_question_chars)
            image = validate_image(request.image, cfg.app.max_image_bytes)
        except InputError as exc:
            yield RunFailed(run_id, message=str(exc))
            return
        loop = EpisodeLoop(
            models=self.models, tools=self.tools, method=METHODS[request.method],
            settings=EpisodeSettings.from_config(cfg, self.models["executor"].traits), store=self.store, run_id=run_id,
            stop_requested=stop_requested,
        )
        try:
            yield from loop.run(EpisodeInput(question=question, namespace=request.namespace, image=image,
                                             caption=request.caption, ground_truth=request.ground_truth))
        except LLMError as exc:
            yield RunFailed(run_id, message=str(exc))
        except InputError as exc:
            yield RunFailed(run_id, message=str(exc))
        except Exception as exc:  # a bug must not take the app down; it is logged in full
            log.exception("run %s failed", run_id)
            yield RunFailed(run_id, message=f"Internal error ({type(exc).__name__}: {exc}); the run was stopped. See the server log.")
