"""Our agent loops for verl: the Executor's ReAct protocol and the Planner's episode.

`mia_executor`: the policy writes ``<think>`` + one ``<tool_call>`` or ``<answer>`` per turn (vLLM
stops at the closing tag); tool calls run our search tool and come back as a user turn wrapped in
``<tool_response>``, exactly as the app's ExecutorSession does. Generated tokens have mask 1,
tool responses mask 0. The reward is computed afterwards by training.verl_recipe.reward.

`mia_planner`: the policy writes the plan; the frozen Executor (an OpenAI-compatible server, e.g.
the stage-1 checkpoint under `vllm serve`, set by MIA_EXECUTOR_BASE_URL / MIA_EXECUTOR_MODEL)
runs it; the policy answers the reflection question (yes/no) and, after yes, writes the
supplementary plan. The whole episode is one token sequence (planner turns mask 1, Executor
findings mask 0) and its reward (training.rewards.planner_reward) is set on the output.
"""

from __future__ import annotations

import os
import time
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from backend import protocol
from backend.judge import answer_contains
from backend.planner import PLANNER_SYSTEM, REFLECT_QUESTION, REPLAN_SYSTEM, REPLAN_WHEN, parse_steps
from backend.tools.search import WikiSearchTool
from training.rewards import planner_format_ok, planner_reward

EXECUTOR_STOPS = [protocol.CALL_CLOSE, protocol.ANSWER_CLOSE]


class _TokenConversation:
    """Prompt ids plus a growing response whose mask says which tokens the policy generated."""

    def __init__(self, loop: AgentLoopBase, messages: list[dict], prompt_ids: list[int]) -> None:
        self.loop, self.messages, self.ids = loop, messages, prompt_ids
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.turns = 0

    async def generate(self, sampling_params: dict[str, Any], request_id: str, **extra: Any) -> str:
        output = await self.loop.server_manager.generate(
            request_id=request_id, prompt_ids=self.ids, sampling_params={**sampling_params, **extra}
        )
        merged, self.mask, logprobs = await self.loop.ct_merge_assistant_token(
            self.ids, output.token_ids, self.mask, self.logprobs or None,
            assistant_logprobs=output.log_probs or None,
        )
        self.ids, self.logprobs = merged.token_ids, logprobs or []
        self.turns += 1
        text = self.loop.tokenizer.decode(output.token_ids, skip_special_tokens=True)
        self.messages.append({"role": "assistant", "content": text})
        return text

    async def add_user(self, content: str) -> None:
        previous = list(self.messages)
        self.messages.append({"role": "user", "content": content})
        merged, self.mask, logprobs = await self.loop.ct_merge_context_msg(
            previous, self.messages, self.ids, self.mask, self.logprobs or None
        )
        self.ids, self.logprobs = merged.token_ids, logprobs or []
        self.turns += 1

    def output(self, response_length: int, reward: float | None = None, **extra_fields: Any) -> AgentLoopOutput:
        response_ids = self.ids[len(self.ids) - len(self.mask):]
        return AgentLoopOutput(
            prompt_ids=self.ids[: len(self.ids) - len(self.mask)],
            response_ids=response_ids[:response_length],
            response_mask=self.mask[:response_length],
            response_logprobs=self.logprobs[:response_length] or None,
            reward_score=reward,
            num_turns=self.turns + 1,
            metrics={},
            extra_fields=extra_fields,
        )


def _tool(loop: AgentLoopBase) -> WikiSearchTool:
    from training.verl_recipe.search_tool import _search_tool

    index_dir = loop.config.get("mia", {}).get("index_cache_dir") or os.environ.get("MIA_INDEX_CACHE_DIR", ".mia/index")
    return _search_tool(str(index_dir))


def _drain(session, question: str, deadline: float) -> None:
    """Run the frozen Executor (blocking HTTP calls) to its answer, off the event loop."""
    for _ in session.run(question, max_turns=8, deadline=deadline):
        pass


@register("mia_executor")
class MiaExecutorAgentLoop(AgentLoopBase):
    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        rollout = self.config.actor_rollout_ref.rollout
        max_turns = rollout.multi_turn.max_assistant_turns or 8
        messages = list(kwargs["raw_prompt"])
        talk = _TokenConversation(self, messages, await self.ct_build_initial_tokens(messages))
        request_id = uuid4().hex
        search = _tool(self)
        for _ in range(max_turns):
            text = await talk.generate(sampling_params, request_id, stop=EXECUTOR_STOPS, include_stop_str_in_output=True)
            action = protocol.parse_action(text)
            if not action.is_tool_call or len(talk.mask) >= rollout.response_length:
                break
            if action.tool_name == search.name:
                result = search(action.arguments)
                body = result.content if result.ok else f"Error: {result.error}"
            else:
                body = f"Error: unknown tool {action.tool_name!r}; available tools: {search.name}"
            await talk.add_user(protocol.format_tool_response(body))
        return talk.output(rollout.response_length)


@register("mia_planner")
class MiaPlannerAgentLoop(AgentLoopBase):
    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        from backend.executor import ExecutorSession
        from backend.llm.openai_compat import OpenAIChatModel
        from backend.metering import RunMeter
        from backend.tools.base import tool_prompt_lines

        rollout = self.config.actor_rollout_ref.rollout
        info = kwargs.get("extra_info") or {}
        question, truth = info["question"], str(kwargs["reward_model"]["ground_truth"])
        search = _tool(self)
        tools_text = tool_prompt_lines([search])
        messages = [
            {"role": "system", "content": PLANNER_SYSTEM + " " + REPLAN_SYSTEM},
            {"role": "user", "content": f"Tools:\n{tools_text}\n\n{info.get('memory_context', '')}\n\nQuestion: {question}\n\nPlan:"},
        ]
        talk = _TokenConversation(self, messages, await self.ct_build_initial_tokens(messages))
        request_id = uuid4().hex
        plan_text = await talk.generate(sampling_params, request_id)
        plan = parse_steps(plan_text)
        executor = OpenAIChatModel(os.environ["MIA_EXECUTOR_BASE_URL"], os.environ["MIA_EXECUTOR_MODEL"])
        session = ExecutorSession(executor, {search.name: search}, RunMeter(), request_id)
        session.start(question, plan or [f"Search the local wiki for: {question}"])
        deadline = time.monotonic() + 600
        await self.loop.run_in_executor(None, _drain, session, question, deadline)
        first_answer = session.answer
        await talk.add_user(f"Research so far:\n{session.trace_text()}\nAnswer: {first_answer or '(none)'}\n\n{REFLECT_QUESTION}")
        decision = await talk.generate(sampling_params, request_id, stop=["\n", "."])
        replanned = decision.strip().lower().startswith(REPLAN_WHEN)
        plan_texts, recovered = [plan_text], [not plan]
        if replanned:
            await talk.add_user("Supplementary plan (at most 3 steps):")
            supplement_text = await talk.generate(sampling_params, request_id)
            supplement = parse_steps(supplement_text, max_steps=3)
            plan_texts.append(supplement_text)
            recovered.append(not supplement)
            session.add_supplementary_plan(supplement or [f"Search again with different keywords for: {question}"])
            await self.loop.run_in_executor(None, _drain, session, question, deadline)
        reward = planner_reward(
            correct_final=answer_contains(session.answer, truth),
            correct_first=answer_contains(first_answer, truth),
            replanned=replanned,
            format_ok=planner_format_ok(recovered, plan_texts, truth),
        )
        return talk.output(rollout.response_length, reward=reward.total, **reward.parts)
