"""The Executor's first two messages exactly as the app renders them, for the verl datasets' rows."""

from __future__ import annotations

from collections.abc import Sequence

from backend.config import DEFAULT_TOOLS
from backend.prompts.executor import question_turn, system_message
from backend.tools.base import tool_prompt_lines
from backend.tools.registry import tool_classes


def executor_prompt_messages(question: str, plan_steps: list[str], tools: Sequence[str] = DEFAULT_TOOLS) -> list[dict]:
    """System prompt (with the tools `tools` names that a question without an image is offered
    offline) and the question + plan turn; the tool classes are enough, as the prompt reads only
    their names, descriptions and argument schemas."""
    return [system_message(tool_prompt_lines(tool_classes(tools))),
            {"role": "user", "content": question_turn(question, plan_steps)}]
