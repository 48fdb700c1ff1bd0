"""The Executor's first two messages exactly as the app builds them, for datasets and agent loops."""

from __future__ import annotations

from backend.executor import ExecutorSession
from backend.metering import RunMeter
from backend.tools.search import WikiSearchTool


def executor_prompt_messages(question: str, plan_steps: list[str]) -> list[dict]:
    """System prompt (with the tool list) and the question + plan turn, via the app's own session.

    The session only formats text here (no model call), so no model is given; the tool class is
    enough because the prompt reads only its name, description and argument schema.
    """
    session = ExecutorSession(None, {WikiSearchTool.name: WikiSearchTool}, RunMeter(), "prompt")  # type: ignore[arg-type]
    session.start(question, plan_steps)
    return session._messages()
