"""verl's custom reward function for the Executor stage: our rewards, read off the transcript.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` with the decoded
response: the Executor's turns interleaved with the tool responses (which our protocol neutralises,
so a retrieved page cannot fake a tag). The trace is parsed back into steps and scored with
`training.rewards.executor_reward`. The verl stage runs a single plan without reflection, so a
correct answer always counts as "before any replan". The weights are the paper's (the defaults of
`rewards.executor`). Our agent loops set the episode's own reward (`reward_score`), which verl uses
instead of this function; on a plan of sub-questions (rows of `plan_shape` "subquestions") only that
one counts, as the hops' searches are the session's and not in the policy's transcript.
"""

from __future__ import annotations

import re

from backend import protocol
from backend.judge import answer_contains
from backend.tools.base import once_per_question_tools
from backend.tools.search import WikiSearchTool
from training.rewards import TraceStep, executor_reward

TOOLS = (WikiSearchTool,)
TOOL_SCHEMAS = {tool.name: tool.parameters for tool in TOOLS}
ONCE_PER_QUESTION = once_per_question_tools(TOOLS)
_CALL = re.compile(re.escape(protocol.CALL_OPEN) + r"(.*?)(?:" + re.escape(protocol.CALL_CLOSE) + r"|$)", re.DOTALL)
_ANSWER = re.compile(re.escape(protocol.ANSWER_OPEN) + r"(.*?)(?:" + re.escape(protocol.ANSWER_CLOSE) + r"|$)", re.DOTALL)


def transcript_steps(transcript: str) -> tuple[list[TraceStep], str]:
    """Tool calls (parsed as the Executor parses them) and the last answer in a transcript."""
    steps = []
    for match in _CALL.finditer(transcript):
        name, arguments, error = protocol.parse_tool_call(match.group(1))
        steps.append(TraceStep(tool=name, arguments=arguments, recovery=error))
    answers = [a.strip() for a in _ANSWER.findall(transcript)]
    return steps, (answers[-1] if answers else "")


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **_: object) -> dict:
    extra_info = extra_info or {}
    plan_steps = extra_info.get("plan_steps")  # a list, or a numpy array when read back from parquet
    steps, answer = transcript_steps(solution_str)
    reward = executor_reward(
        correct=answer_contains(answer, str(ground_truth)),
        answer=answer,
        replanned=False,
        steps=steps,
        plan_step_count=0 if plan_steps is None else len(plan_steps),
        tool_schemas=TOOL_SCHEMAS,
        assistant_texts=[solution_str],
        once_per_question=ONCE_PER_QUESTION,
    )
    return {"score": reward.total, **reward.parts}
