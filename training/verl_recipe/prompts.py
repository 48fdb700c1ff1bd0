"""The Executor's first two messages exactly as the app renders them, for the verl datasets' rows."""

from __future__ import annotations

from backend.prompts.executor import question_turn, system_message
from backend.tools.base import tool_prompt_lines
from backend.tools.search import WikiSearchTool


def executor_prompt_messages(question: str, plan_steps: list[str]) -> list[dict]:
    """System prompt (with the tool list) and the question + plan turn; the tool class is enough,
    as the prompt reads only its name, description and argument schema."""
    return [system_message(tool_prompt_lines([WikiSearchTool])), {"role": "user", "content": question_turn(question, plan_steps)}]
