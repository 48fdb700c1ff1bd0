"""Around a user's question: the learner gives way while it runs, and a Planner version promoted
meanwhile answers it. The web app and `python -m app ask` both go through here; the learner is the
in-process one (ttrl.worker = "thread") or a handle on a worker process (training.ttrl.remote)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


@contextmanager
def question_running(learner) -> Iterator[Callable[[], None]]:
    """Yields the function that renews the notice; call it as the run's events arrive."""
    if learner is None:
        yield lambda: None
        return
    try:
        learner.sync()
    except Exception:  # a version that cannot be loaded must not stop the question
        log.exception("loading the promoted Planner")
    learner.user_run_started()
    try:
        yield learner.user_still_running
    finally:
        learner.user_run_finished()
