"""The agent loop: retrieve memories, plan, execute, reflect, judge, consolidate.

`ResearchAgent.run` is a generator of typed events (backend.events); the UI, the command line,
the evaluation harness and the tests consume the same stream. Roles never reach into each other:
the loop hands each one the plain data it needs.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Iterator, Mapping

from backend.config import Config
from backend.events import (
    Event,
    MemoriesRetrieved,
    MemoryStored,
    PlanReady,
    ReflectionDecided,
    RunFailed,
    RunFinished,
    RunStarted,
    TextDelta,
    VerdictReady,
)
from backend.executor import ExecutorSession
from backend.inputs import InputError, validate_image, validate_question
from backend.judge import Judge
from backend.llm.base import ChatModel, LLMError
from backend.manager import Manager, memory_to_dict
from backend.metering import MeteredModel, RunMeter
from backend.planner import Planner, format_cases, format_memories
from backend.runlog import RunLog
from backend.tools.base import Tool, tool_names_line
from memory_db import MemoryStore

log = logging.getLogger(__name__)


METHODS = ("mia", "none", "plan", "rag", "trace", "memento")
MEMORY_METHODS = ("mia", "rag", "trace", "memento")
PLANNING_METHODS = ("mia", "plan", "memento")


@dataclass
class RunRequest:
    """One question. `method` selects the full loop or one of the evaluation baselines:
    mia = Manager + Planner + Executor with reflection; none = the Executor alone;
    plan = Planner + Executor, no memory; rag = raw past trajectories in the Executor's prompt;
    trace = compressed workflow summaries in the Executor's prompt; memento = past cases (question,
    plan, outcome) shown to the Planner, in the style of case-based planning agents, no reflection."""

    question: str
    namespace: str = "default"
    image: str | None = None
    caption: str | None = None  # given by the user
    ground_truth: str | None = None
    method: str = "mia"


def past_research_context(memories: list[dict], *, raw: bool, max_chars: int = 700) -> str:
    """Memories as Executor context for the rag (raw trajectories) and trace (summaries) baselines."""
    lines = []
    for m in memories:
        verdict = "correct" if m["correct"] else "incorrect"
        body = m.get("trajectory") if raw else m.get("summary")
        lines.append(f"- ({verdict}) Q: {m['question']}\n  {(body or m.get('summary') or '')[:max_chars]}")
    return "\n".join(lines)


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

    # -- helpers ----------------------------------------------------------------------------
    def _caption(self, request: RunRequest, run_id: str, meter: RunMeter) -> tuple[str | None, str | None]:
        """The image's caption and where it came from: the user, else the best image-index match."""
        if request.caption:
            return request.caption.strip(), "user"
        vision = next((m for m in self.models.values() if request.image and m.supports_images), None)
        if vision is not None:
            completion = vision.generate(
                [{"role": "user", "content": "Describe this image in one short sentence.", "image": request.image}],
                max_new_tokens=60,
            )
            meter.add_llm("captioner", completion.seconds, completion.prompt_tokens, completion.completion_tokens)
            if completion.text.strip():
                return completion.text.strip(), "vision-model"
        if request.image and "image_search" in self.tools:
            start = time.perf_counter()
            result = self.tools["image_search"]({"image": request.image})
            meter.add_tool(time.perf_counter() - start)
            if result.ok and result.passages:
                return result.passages[0].title, "image-search"
        return None, None

    def run(self, request: RunRequest) -> Iterator[Event]:
        run_id = uuid.uuid4().hex[:12]
        for event in self._run(request, run_id):
            if self.runlog is not None and not isinstance(event, TextDelta):
                self.runlog.append(request.namespace, event)
            yield event

    def _run(self, request: RunRequest, run_id: str) -> Iterator[Event]:
        cfg = self.config
        meter = RunMeter()
        try:
            if request.method not in METHODS:
                raise InputError(f"Unknown method {request.method!r}; choose one of {', '.join(METHODS)}.")
            question = validate_question(request.question, cfg.agent.max_question_chars)
            image = validate_image(request.image, cfg.app.max_image_bytes)
        except InputError as exc:
            yield RunFailed(run_id, message=str(exc))
            return
        models = {role: MeteredModel(model, meter, role) for role, model in self.models.items()}
        planner = Planner(models["planner"], max_new_tokens=min(cfg.role("planner").max_new_tokens, 200))
        # A small judge may not call an answer correct that shares no word with the gold one.
        judge = Judge(models["judge"], require_overlap=models["judge"].traits.small)
        manager = Manager(models["manager"], self.store, summary_max_words=cfg.agent.summary_max_words)
        executor_cfg = cfg.role("executor")
        executor_traits = models["executor"].traits
        deadline = time.monotonic() + cfg.agent.max_seconds
        try:
            caption, caption_source = self._caption(request, run_id, meter)
            yield RunStarted(
                run_id,
                question=question,
                namespace=request.namespace,
                image=image,
                caption=caption,
                caption_source=caption_source,
                ground_truth=request.ground_truth,
            )
            method = request.method
            uses_memory = method in MEMORY_METHODS
            successful: list[dict] = []
            failed: list[dict] = []
            if uses_memory:
                memories = manager.retrieve(question, request.namespace, caption, cfg.agent.memory_k,
                                            min_similarity=cfg.agent.min_memory_similarity,
                                            unverified_weight=cfg.agent.unverified_memory_weight)
                successful = [memory_to_dict(m) for m in memories.successful]
                failed = [memory_to_dict(m) for m in memories.failed]
                yield MemoriesRetrieved(run_id, successful=successful, failed=failed)

            steps_done: list[str] = []
            if method in PLANNING_METHODS:
                tools_text = tool_names_line(t for n, t in self.tools.items() if n != "image_search" or image)
                k = cfg.agent.memory_k
                sparse = len(successful) < k or len(failed) < k
                first_planner = planner
                if method != "memento" and sparse and cfg.agent.sparse_memory_planner == "manager":
                    # As in the reference: until memory can show k of each, the Manager's model plans.
                    first_planner = Planner(models["manager"], max_new_tokens=planner.max_new_tokens)
                if method == "memento":
                    memories_text = format_cases(successful + failed)
                else:
                    memories_text = format_memories(successful, failed)
                blueprint = first_planner.plan(question, memories_text, tools_text, caption)
                yield PlanReady(
                    run_id, text=blueprint.text, steps=blueprint.steps, recovered=blueprint.recovered,
                    planner_model=f"{first_planner.model.role}: {first_planner.model.name}",
                )
                steps_done = list(blueprint.steps)

            # Image search is offered only with an image, as the paper's Executor.
            run_tools = {n: t for n, t in self.tools.items() if n != "image_search" or image}
            session = ExecutorSession(
                models["executor"], run_tools, meter, run_id,
                max_new_tokens=executor_cfg.max_new_tokens, image=image,
                max_llm_calls=cfg.agent.llm_calls_for(executor_traits), max_tokens=cfg.agent.max_tokens,
                guided=cfg.agent.guided_for(executor_traits),
            )
            context = None
            if method in ("rag", "trace"):
                context = past_research_context(successful + failed, raw=method == "rag") or None
            session.start(question, steps_done, caption, context=context)
            max_turns = cfg.agent.turns_for(executor_traits)
            yield from session.run(question, max_turns=max_turns, deadline=deadline)
            first_answer = session.answer

            reflections = cfg.agent.reflections if method == "mia" else 0
            for round_no in range(1, reflections + 1):
                if session.limit_reached(deadline):
                    break
                reflection = planner.reflect(question, session.answer, session.trace_text(),
                                             support=session.answer_support(question))
                yield ReflectionDecided(run_id, replan=reflection.replan, scores=reflection.scores, round=round_no)
                if not reflection.replan:
                    break
                supplement = planner.replan(question, session.answer, session.trace_text(), steps_done)
                yield PlanReady(
                    run_id, text=supplement.text, steps=supplement.steps, revision=round_no,
                    recovered=supplement.recovered, planner_model=f"planner: {planner.model.name}",
                )
                steps_done.extend(supplement.steps)
                session.add_supplementary_plan(supplement.steps)
                yield from session.run(question, max_turns=cfg.agent.supplement_turns_for(executor_traits), deadline=deadline)
                yield from session.settle_after_replan()

            answer = session.answer
            if request.ground_truth:
                verdict = judge.grade(question, answer, request.ground_truth)
            else:
                verdict = judge.evaluate_without_ground_truth(question, answer, session.passages)
            yield VerdictReady(
                run_id, label=verdict.label, method=verdict.method, ground_truth=request.ground_truth,
                feedback=verdict.feedback, source=verdict.source, confidence=verdict.confidence,
                evidence=verdict.evidence, leaning=verdict.leaning,
            )

            used_ids = [m["id"] for m in successful + failed]
            if used_ids and (verdict.verified or cfg.agent.count_unverified_outcomes):
                # Win rates count verified outcomes: the Judge's own opinion can be steered by what the
                # run read. A memory may have been evicted or deleted while this run used it.
                self.store.record_outcome(used_ids, correct=verdict.correct, namespace=request.namespace, missing_ok=True)

            if not uses_memory:
                yield RunFinished(run_id, answer=answer, stats=meter.snapshot())
                return
            consolidation = manager.consolidate(
                question=question,
                caption=caption,
                plan_steps=steps_done,
                steps=session.steps,
                passages=session.passages,
                support=session.answer_support(question),
                answer=answer,
                verdict=verdict.label,
                namespace=request.namespace,
                compress=method != "memento",
                provenance={
                    "run_id": run_id,
                    "models": {role: m.name for role, m in self.models.items()},
                    "judge_verdict": verdict.label,
                    "judge_method": verdict.method,
                    "judge_feedback": verdict.feedback,
                    # Only ground truth (or, later, a person's feedback) verifies a verdict: the Judge's
                    # own opinion can be steered by what the run read, e.g. text planted in a page.
                    "verified": verdict.verified,
                    "verdict_source": verdict.source,
                    "judge_confidence": verdict.confidence,
                    "ground_truth": request.ground_truth,
                    "answer": answer,
                    "first_answer": first_answer,
                    "memories_used": used_ids,
                    "sources": [s.get("url") or s["title"] for s in session.sources(answer)],
                    "searched": sorted({p.get("url") or p["title"] for p in session.passages}),
                    "trajectory": f"{session.trace_text(max_chars=3000)}\nAnswer: {answer}",
                    "method": method,
                },
            )
            memory = consolidation.memory
            yield MemoryStored(
                run_id,
                memory_id=memory.id,
                summary=memory.summary,
                correct=memory.correct,
                question_type=memory.question_type,
                summary_source=consolidation.summary_source,
            )
            yield RunFinished(run_id, answer=answer, stats=meter.snapshot())
        except LLMError as exc:
            yield RunFailed(run_id, message=str(exc))
        except InputError as exc:
            yield RunFailed(run_id, message=str(exc))
        except Exception as exc:  # a bug must not take the app down; it is logged in full
            log.exception("run %s failed", run_id)
            yield RunFailed(run_id, message=f"Internal error ({type(exc).__name__}: {exc}); the run was stopped. See the server log.")
