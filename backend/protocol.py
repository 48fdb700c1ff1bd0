"""The Executor's text protocol, and a tolerant parser for it.

Each Executor turn is ``<think>...</think>`` followed by exactly one action:
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` or ``<answer>...</answer>``.
Tool results go back to the model as ``<tool_response>...</tool_response>``.

Small models drop closing tags, wrap JSON in prose or use single quotes; the parser accepts what
is unambiguous and otherwise reports exactly what was wrong, so the caller can recover visibly.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
STOP_STRINGS = (CALL_CLOSE, ANSWER_CLOSE, RESPONSE_OPEN)


@dataclass
class Action:
    """One parsed Executor turn: a tool call, an answer, or an error describing what was unusable."""

    think: str = ""
    tool_name: str | None = None
    arguments: dict = field(default_factory=dict)
    answer: str | None = None
    error: str | None = None
    format_problems: list[str] = field(default_factory=list)

    @property
    def is_tool_call(self) -> bool:
        return self.tool_name is not None and self.error is None

    @property
    def is_answer(self) -> bool:
        return self.answer is not None and self.error is None


def _between(text: str, open_tag: str, close_tag: str) -> tuple[str | None, bool]:
    """Text after ``open_tag`` up to ``close_tag`` (or the end); and whether the close was present."""
    start = text.find(open_tag)
    if start < 0:
        return None, False
    start += len(open_tag)
    end = text.find(close_tag, start)
    if end < 0:
        return text[start:], False
    return text[start:end], True


def _first_json_object(text: str) -> str | None:
    """The first balanced ``{...}`` in text, honouring strings."""
    start = text.find("{")
    while start >= 0:
        depth, in_string, escaped = 0, False, False
        for i in range(start, len(text)):
            ch = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == in_string:
                    in_string = False
            elif ch in "\"'":
                in_string = ch
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None


def _load_object(raw: str) -> dict | None:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        try:  # single-quoted dicts are common from small models; literal_eval never executes code
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def parse_tool_call(body: str) -> tuple[str | None, dict, str | None]:
    """Parse the inside of a tool_call tag into (name, arguments, error)."""
    raw = _first_json_object(body)
    if raw is None:
        return None, {}, "the tool call holds no JSON object"
    obj = _load_object(raw)
    if obj is None:
        return None, {}, "the tool call's JSON does not parse"
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, {}, 'the tool call has no "name"'
    arguments = obj.get("arguments", {})
    if isinstance(arguments, str):
        arguments = _load_object(arguments) or {}
    if not isinstance(arguments, dict):
        return None, {}, '"arguments" must be a JSON object'
    return name.strip(), arguments, None


def parse_action(text: str) -> Action:
    """Parse one Executor turn. Prefers an explicit answer or tool call, in the order written."""
    action = Action()
    think, think_closed = _between(text, THINK_OPEN, THINK_CLOSE)
    if think is not None:
        action.think = think.strip()
        if not think_closed and (CALL_OPEN in think or ANSWER_OPEN in think):
            action.think = think.split("<", 1)[0].strip()
            action.format_problems.append("unclosed <think>")
    call_at, answer_at = text.find(CALL_OPEN), text.find(ANSWER_OPEN)
    if answer_at >= 0 and (call_at < 0 or answer_at < call_at):
        answer, closed = _between(text, ANSWER_OPEN, ANSWER_CLOSE)
        answer = (answer or "").strip()
        if not closed:
            action.format_problems.append("unclosed <answer>")
        if not answer:
            action.error = "the answer tag is empty"
        action.answer = answer
        return action
    if call_at >= 0:
        body, closed = _between(text, CALL_OPEN, CALL_CLOSE)
        if not closed:
            action.format_problems.append("unclosed <tool_call>")
        name, arguments, error = parse_tool_call(body or "")
        action.tool_name, action.arguments, action.error = name, arguments, error
        return action
    action.error = "no <tool_call> or <answer> in the output"
    return action


def neutralise(text: str) -> str:
    """Retrieved text is data: replace angle brackets so a page cannot fake one of our tags."""
    return text.replace("<", "‹").replace(">", "›")


def format_tool_response(content: str) -> str:
    return f"{RESPONSE_OPEN}\n{neutralise(content)}\n{RESPONSE_CLOSE}"


def clean_query(text: str, max_chars: int = 200) -> str:
    """A search query (or a short answer) as a small model wrote it, without markup, quotes or placeholders."""
    cleaned = re.sub(r"<[^>]*>", " ", text).replace('"', " ").replace("\\", " ")
    return " ".join(cleaned.split())[:max_chars]
