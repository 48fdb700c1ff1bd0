"""Running a stream of questions through the real agent, in order, one result row per question.

Memory evolves along the stream exactly as in production (the agent judges each answer against
its ground truth and consolidates it), but in the evaluation's own database and namespace inside
its output folder, never the user's memory.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from backend.agent import ResearchAgent, RunRequest
from backend.config import Config
from backend.eval.datasets import EvalQuestion, load_questions
from backend.eval.metrics import exact_match, token_f1
from backend.eval.results import FAILED, EvalRow, ResultsFile
from backend.eval.spec import (
    ROWS_FILE,
    RUNS_FOLDER,
    WARM_ROWS_FILE,
    EvalError,
    EvalSpec,
    PlannerVersion,
    check_or_write_manifest,
    inherited_run_ids,
    memory_url_for,
)
from backend.events import Event
from backend.feedback import FeedbackQueue, submit_feedback
from backend.judge import CORRECT, Judge
from backend.llm.registry import backend_spec
from backend.tools.base import offered_tools, query_tool
from backend.tools.search import WikiSearchTool
from backend.replay import replay
from backend.runlog import RunLog
from backend.runtime import Runtime, build_runtime
from memory_db import MemoryStore
from memory_db.provenance import read_provenance

log = logging.getLogger(__name__)


def open_eval_runtime(config: Config, out_dir: Path, *, progress: bool = True,
                      planner_version: PlannerVersion | None = None) -> Runtime:
    """The real models and tools, with the memory database and run logs inside `out_dir`. The search
    reads the wiki alone: no user's documents, shared ones included, change an evaluation. With
    `planner_version` (the spec's), the Planner answers with that version, built by the Planner's
    backend as the app builds a promoted one."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = dataclasses.replace(config, memory_url=memory_url_for(out_dir))
    runtime = build_runtime(config, progress=progress, with_documents=False)
    models = runtime.agent.models
    if planner_version is not None:
        role = config.role("planner")
        models = {**models, "planner": backend_spec(role.backend).planner_version(config, role, planner_version)}
    runlog = RunLog(out_dir / RUNS_FOLDER)
    agent = ResearchAgent(
        config, models=models, tools=runtime.agent.tools, store=runtime.store, runlog=runlog
    )
    return dataclasses.replace(runtime, agent=agent, runlog=runlog)


def row_from_events(index: int, question: EvalQuestion, method: str, events: list[Event], harness_seconds: float) -> EvalRow:
    """One result row from a run's event stream (a failed run becomes a row with verdict "failed")."""
    run = replay(events)
    memory_ids = run.memories_used
    last = run.last_answer_event
    answer = run.answer
    forced, forced_reason = (last.forced, last.reason) if last is not None else (False, "")
    verdict, judge_method = (run.verdict.label, run.verdict.method) if run.verdict is not None else (FAILED, "")
    stats = run.finished.stats if run.finished is not None else {}
    memory_stored = run.memory_stored.memory_id if run.memory_stored is not None else None
    run_id, error = run.run_id, None
    if run.failure is not None:
        verdict, error = FAILED, run.failure.message
    elif run.finished is None:
        verdict, error = FAILED, "the run ended without a RunFinished event"
    calls_by_role = {key.removeprefix("calls_"): int(v) for key, v in stats.items() if key.startswith("calls_")}
    return EvalRow(
        index=index,
        id=question.id,
        question=question.question,
        gold=question.answer,
        answer=answer,
        verdict=verdict,
        judge_method=judge_method,
        correct=verdict == "correct",
        em=exact_match(answer, question.answer),
        f1=round(token_f1(answer, question.answer), 4),
        llm_calls=int(stats.get("llm_calls", 0)),
        prompt_tokens=int(stats.get("prompt_tokens", 0)),
        completion_tokens=int(stats.get("completion_tokens", 0)),
        cached_prompt_tokens=int(stats.get("cached_prompt_tokens", 0)),
        tool_calls=int(stats.get("tool_calls", 0)),
        # A failed run reports no split; its time is kept whole and left out of the split in reports.
        wall_seconds=float(stats.get("wall_seconds", round(harness_seconds, 3))),
        llm_seconds=float(stats.get("llm_seconds", 0.0)),
        tool_seconds=float(stats.get("tool_seconds", 0.0)),
        other_seconds=float(stats.get("other_seconds", 0.0)),
        harness_seconds=round(harness_seconds, 3),
        memories_used=len(memory_ids),
        memory_ids=memory_ids,
        memory_stored=memory_stored,
        forced_answer=forced,
        forced_reason=forced_reason,
        method=method,
        run_id=run_id,
        error=error,
        calls_by_role=calls_by_role,
        first_answer_seconds=run.first_answer_seconds,
    )


def teach_after_run(agent: ResearchAgent, row: EvalRow, question: EvalQuestion, namespace: str) -> EvalRow:
    """Give the question's ground truth as feedback on its run, as a person types the right answer into
    the app's feedback panel and sends it: the Judge grades the run's answer against it, the run's
    memory keeps it, and the row takes that verdict."""
    outcome = submit_feedback(
        store=agent.store, runlog=agent.runlog, judge=Judge(agent.models["judge"]), queue=FeedbackQueue(agent.store),
        namespace=namespace, run_id=row.run_id, user="eval-teacher", right_answer=question.answer,
        search=query_tool(offered_tools(agent.tools, has_image=False, namespace=namespace)),
    )
    return dataclasses.replace(row, verdict=outcome.label_after, correct=outcome.label_after == CORRECT,
                               judge_method="taught: the Judge against the typed right answer")


def agent_hiding(agent: ResearchAgent, titles: tuple[str, ...]) -> ResearchAgent:
    """The agent for a question whose wiki articles `titles` its search leaves out (its image shows
    them instead); the same agent when there are none."""
    if not titles:
        return agent
    if not any(isinstance(tool, WikiSearchTool) for tool in agent.tools.values()):
        raise EvalError("a question hides wiki articles (hide_titles), but no wiki search is among the tools.")
    try:
        tools = {name: tool.hiding(titles) if isinstance(tool, WikiSearchTool) else tool
                 for name, tool in agent.tools.items()}
    except ValueError as exc:
        raise EvalError(f"hide_titles: {exc}") from None
    return ResearchAgent(agent.config, models=agent.models, tools=tools, store=agent.store, runlog=agent.runlog)


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def remove_unrecorded_memories(store: MemoryStore, namespace: str, recorded_run_ids: set[str]) -> int:
    """Delete memories written by a question whose row was never written (the run was interrupted),
    so that its re-run does not find its own earlier attempt in memory. Returns how many went."""
    orphans, offset = [], 0
    while True:
        page = store.list(namespace=namespace, limit=500, offset=offset)
        orphans += [m.id for m in page if read_provenance(m.provenance).run_id not in recorded_run_ids]
        if len(page) < 500:
            break
        offset += 500
    for memory_id in orphans:
        store.delete(memory_id, namespace=namespace, actor="eval-resume")
    return len(orphans)


def run_stream(
    agent: ResearchAgent,
    questions: list[EvalQuestion],
    *,
    method: str,
    namespace: str,
    results: ResultsFile,
    seed: int = 0,
    progress: bool = True,
    desc: str = "eval",
    teach: bool = False,
) -> list[EvalRow]:
    """Answer every question not yet in `results`, in order; returns the rows of `questions`. With
    `teach`, each question is asked without its ground truth, which is then given as a person's typed
    right answer (teach_after_run); the row's verdict is the Judge's against it."""
    done = {row.id: row for row in results.read()}
    # A title the wiki does not hold is refused before the first question, not at the fiftieth.
    agent_hiding(agent, tuple(sorted({title for q in questions if q.id not in done for title in q.hidden_titles})))
    finished = [done[q.id] for q in questions if q.id in done]
    bar = tqdm(total=len(questions), initial=len(finished), desc=desc, unit="q", disable=not progress)
    hits = sum(row.correct for row in finished)
    try:
        for index, question in enumerate(questions):
            if question.id in done:
                continue
            seed_everything(seed + index)  # per question, so a resumed stream samples as an unbroken one
            request = RunRequest(
                question=question.question,
                namespace=namespace,
                image=question.image,
                ground_truth=None if teach else question.answer,
                method=method,
            )
            started = time.perf_counter()
            events = list(agent_hiding(agent, question.hidden_titles).run(request))
            row = row_from_events(index, question, method, events, time.perf_counter() - started)
            if teach and not row.error:
                row = teach_after_run(agent, row, question, namespace)
            if row.error:
                log.warning("question %s failed: %s", question.id, row.error)
            results.append(row)
            done[question.id] = row
            hits += row.correct
            answered = sum(q.id in done for q in questions)
            bar.update(1)
            bar.set_postfix(acc=f"{hits / answered:.3f}", last=row.verdict)
    finally:
        bar.close()
    return [done[q.id] for q in questions]


@dataclass
class EvalOutcome:
    rows: list[EvalRow]
    warm_rows: list[EvalRow]
    manifest: dict


def evaluate(spec: EvalSpec, runtime: Runtime, *, progress: bool = True) -> EvalOutcome:
    """Warm the memory (optional), then run the evaluation stream; resumes what `spec.out_dir` holds."""
    if runtime.store.url != spec.memory_url:
        raise EvalError(
            f"the runtime's memory is {runtime.store.url}, not this evaluation's own ({spec.memory_url}); "
            "build it with open_eval_runtime(config, out_dir)."
        )
    questions = load_questions(spec.data, limit=spec.limit, skip=spec.skip)
    warm_questions = load_questions(spec.warm_from, limit=spec.warm_limit) if spec.warm_from else []
    manifest = check_or_write_manifest(spec, runtime.config)
    warm_results = ResultsFile(spec.out_dir / WARM_ROWS_FILE)
    results = ResultsFile(spec.out_dir / ROWS_FILE)
    recorded = {row.run_id for row in warm_results.read() + results.read()} | inherited_run_ids(spec.out_dir)
    removed = remove_unrecorded_memories(runtime.store, spec.namespace, recorded)
    if removed:
        log.warning("removed %d memories left by an interrupted question; it will be asked again", removed)
    common = dict(method=spec.method, namespace=spec.namespace, seed=spec.seed, progress=progress)
    warm_rows = []
    if warm_questions:
        warm_rows = run_stream(
            runtime.agent, warm_questions, results=warm_results, desc=f"warm-up {spec.method}", **common
        )
    rows = run_stream(runtime.agent, questions, results=results, desc=spec.display_label, teach=spec.teach, **common)
    return EvalOutcome(rows=rows, warm_rows=warm_rows, manifest=manifest)
