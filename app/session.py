"""What every view of the web UI shares: the runtime, who is logged in, their namespace, the modes."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import gradio as gr

from app.auth import UserDirectory
from app.learner_notice import question_running
from app.readonly import ReadOnlyStore
from app.user_files import UserFiles
from backend.agent import ResearchAgent
from backend.feedback import FeedbackQueue, open_feedback_queue
from backend.runtime import Runtime

if TYPE_CHECKING:  # importing the learner pulls in torch and peft; only `serve` with learning on needs it
    from training.ttrl.learner import TestTimeLearner

DEFAULT_NAMESPACE = "default"
# Questions the research view runs at once; as many again may finish after their pages closed
# (beyond that, a closed page's run is stopped with the answer so far).
RUNS_AT_ONCE = 4


class ReadOnlyModeError(PermissionError):
    """A change was asked for in the read-only demo."""

    def __init__(self) -> None:
        super().__init__("This is a read-only demo: memories can be seen and used, but not changed.")


@dataclass
class AppContext:
    runtime: Runtime
    users: UserDirectory | None = None
    read_only: bool = False
    learner: TestTimeLearner | None = None  # test-time learning, when on (never in the read-only demo)
    learning_off_reason: str = ""  # why learning is not running although ttrl.enabled is true
    queue: FeedbackQueue = field(init=False)
    files: UserFiles = field(default_factory=UserFiles)  # whose each served export or upload is
    settings_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    # The ids of the runs this process is running now (on a page, or finishing after it closed):
    # History tells them from runs the app stopped in the middle of (a crash, a restart).
    runs_under_way: set[str] = field(default_factory=set, init=False)
    background_runs: threading.BoundedSemaphore = field(
        default_factory=lambda: threading.BoundedSemaphore(RUNS_AT_ONCE), init=False)

    def __post_init__(self) -> None:
        self.queue = open_feedback_queue(self.runtime.store, self.runtime.config.data_dir, writable=not self.read_only)

    def question_running(self):
        """Around a user's run: the learner gives way while it goes (the yielded function renews that
        notice; call it as events arrive) and a version promoted meanwhile is picked up first."""
        return question_running(self.learner)

    @property
    def agent(self) -> ResearchAgent:
        """The agent runs use; in read-only mode it reads the store but never writes to it, and its
        runs are not logged: the demo's visitors share one namespace and would see each other's runs."""
        agent = self.runtime.agent
        if not self.read_only:
            return agent
        return ResearchAgent(agent.config, models=agent.models, tools=agent.tools,
                             store=ReadOnlyStore(self.runtime.store), runlog=None)

    def user_of(self, request: gr.Request | None) -> str:
        name = getattr(request, "username", None) if request is not None else None
        return name or DEFAULT_NAMESPACE

    def namespace_of(self, request: gr.Request | None) -> str:
        """The logged-in user's own namespace (= user name); `default` without logins."""
        return self.user_of(request)

    def is_admin(self, request: gr.Request | None) -> bool:
        if self.users is None:
            return not self.read_only  # a single local user owns everything; a public demo's visitors do not
        return self.users.is_admin(getattr(request, "username", None))

    def visible_namespace(self, request: gr.Request | None, chosen: str | None) -> str:
        """The namespace a view may show: the admin's choice, or the user's own."""
        if chosen and self.is_admin(request):
            return chosen
        return self.namespace_of(request)

    def require_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyModeError()
