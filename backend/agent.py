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
from backend.follow_up import FollowUp, FollowUpContext, Rewrite, Thread, reusable_passages, rewrite, thread_of
from backend.inputs import InputError, validate_image, validate_question
from backend.llm.base import ChatModel, LLMError
from backend.methods import METHOD_NAMES, METHODS
from backend.plan_review import PERSON, PlanDraft, checked_plan
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
    plan: list[str] | None = None  # the person's plan, reviewed before the run: researched exactly as written
    drafted_plan: list[str] | None = None  # the Planner's draft the person's plan was made from
    follow_up: FollowUp | None = None  # a follow-up: `question` is then the standalone wording it is researched as


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

    def _loop(self, request: RunRequest, run_id: str, stop_requested: Callable[[], bool] | None = None) -> EpisodeLoop:
        return EpisodeLoop(
            models=self.models, tools=self.tools, method=METHODS[request.method],
            settings=EpisodeSettings.from_config(self.config, self.models["executor"].traits), store=self.store,
            run_id=run_id, stop_requested=stop_requested,
        )

    def draft_plan(self, request: RunRequest) -> PlanDraft:
        """The Planner's plan for the question, not yet researched, for the person to review
        (backend.plan_review); InputError or LLMError say what went wrong."""
        if request.method not in METHODS:
            raise InputError(f"Unknown method {request.method!r}; choose one of {', '.join(METHOD_NAMES)}.")
        question = validate_question(request.question, self.config.agent.max_question_chars)
        image = validate_image(request.image, self.config.app.max_image_bytes)
        return self._loop(request, "draft-" + uuid.uuid4().hex[:6]).draft_plan(
            EpisodeInput(question=question, namespace=request.namespace, image=image, caption=request.caption))

    def thread(self, namespace: str, run_id: str) -> Thread:
        """The thread a logged run belongs to (backend.follow_up), oldest question first."""
        if self.runlog is None:
            raise InputError("Follow-up questions need the run log, which this demo does not keep: ask the question "
                             "in full.")
        return thread_of(lambda wanted: self.runlog.load(namespace, wanted), run_id.strip())

    def read_follow_up(self, asked: str, namespace: str, of_run: str) -> Rewrite:
        """A follow-up made standalone with its thread (backend.follow_up.rewrite; the Planner's model
        chooses where the rules leave several candidates), for the person to see and change."""
        asked = validate_question(asked, self.config.agent.max_question_chars)
        return rewrite(asked, self.thread(namespace, of_run), self.models["planner"])

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
            plan = (checked_plan(request.plan, cfg.agent.plan_shape, cfg.agent.max_question_chars)
                    if request.plan is not None else None)
            follow_up = self._follow_up_context(request, question)
        except InputError as exc:
            yield RunFailed(run_id, message=str(exc))
            return
        loop = self._loop(request, run_id, stop_requested)
        try:
            yield from loop.run(EpisodeInput(question=question, namespace=request.namespace, image=image,
                                             caption=request.caption, ground_truth=request.ground_truth,
                                             plan_steps=plan, plan_source=PERSON if plan is not None else None,
                                             drafted_plan=request.drafted_plan, follow_up=follow_up))
        except LLMError as exc:
            yield RunFailed(run_id, message=str(exc))
        except InputError as exc:
            yield RunFailed(run_id, message=str(exc))
        except Exception as exc:  # a bug must not take the app down; it is logged in full
            log.exception("run %s failed", run_id)
            yield RunFailed(run_id, message=f"Internal error ({type(exc).__name__}: {exc}); the run was stopped. See the server log.")

    def _follow_up_context(self, request: RunRequest, question: str) -> FollowUpContext | None:
        """A follow-up's thread and the earlier passages its session holds, those most relevant to the
        question as it is researched first."""
        if request.follow_up is None:
            return None
        thread = self.thread(request.namespace, request.follow_up.of_run)
        return FollowUpContext(thread=thread.id, follows=thread.last.run_id, asked=request.follow_up.asked,
                               how=request.follow_up.how, passages=reusable_passages(thread, question))
