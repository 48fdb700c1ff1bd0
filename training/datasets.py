"""RL datasets for the two stages, as parquet, from HotpotQA-style JSONL or from the app's own runs.

Stage 1 (Executor): question, ground truth, memory context and a plan made by the current Planner.
Stage 2 (Planner): question, ground truth, memory context; the trained Executor is the environment.
Each record says its plan shape (`plan_shape`, the app's `agent.plan_shape`): "steps", a numbered plan
of actions written by `Planner.plan` after the contrastive memories; or "subquestions", a decomposition
written by `Planner.decompose` after the worked examples among the memories (backend.hops). A file
written before records had the field is read as "steps".

App runs come from the run log (`<data_dir>/runs/<namespace>/<run_id>.jsonl`) plus the feedback
users gave in the app (the learning queue in the app's memory database: `<data_dir>/memory.sqlite`
by default, or the deployment's PostgreSQL).
A run is used when it has a ground truth (given with the question, or typed as the right answer in
feedback) or a thumbs-up, in which case its own answer is the label (test-time learning from feedback).
A plan the person reviewed and ran (backend.plan_review) comes with it as the person's example: its
records carry that plan with `plan_source` "person", and stage 1 gives it to the Executor in place of
the Planner's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from backend.hops import worked_examples_shown
from backend.plan_review import PERSON, plan_text
from backend.planner import Planner
from backend.prompts.manager import format_memories
from backend.question import Question
from backend.replay import replay
from backend.runlog import RunLog

STAGES = ("executor", "planner")
PLAN_SHAPES = ("steps", "subquestions")  # the values of the app's agent.plan_shape


class DatasetError(ValueError):
    """The input data cannot be turned into an RL dataset; the message says what to fix."""


@dataclass
class QuestionItem:
    question: str
    ground_truth: str
    source: str  # "hotpotqa:<id>" or "run:<namespace>/<run_id>"
    memory_context: str = ""  # the memories as the Planner is shown them for the plan shape ("" = none)
    person_plan: list[str] = field(default_factory=list)  # the plan the person reviewed and ran, as written


@dataclass
class RLRecord:
    question: str
    ground_truth: str
    source: str
    memory_context: str = ""
    plan_text: str = ""
    plan_steps: list[str] = field(default_factory=list)  # steps; or for "subquestions" the hops as written (#1, #2)
    plan_shape: str = "steps"  # "steps" | "subquestions": what plan_steps are and how memory_context is shown
    plan_source: str = "planner"  # "person": plan_steps are the plan a person reviewed and ran (their example)


MemoryLookup = Callable[[str], str]


def load_hotpotqa(path: Path, limit: int | None = None) -> list[QuestionItem]:
    """Training questions from a question file, read as the evaluation harness reads it."""
    from backend.eval import datasets as question_files

    try:
        questions = question_files.load_questions(path, limit=limit)
    except question_files.DatasetError as exc:
        raise DatasetError(f"{exc} Point `questions_file` (or --hotpotqa) at a HotpotQA-style JSONL file.") from None
    return [QuestionItem(q.question, q.answer, f"hotpotqa:{q.id}") for q in questions]


def check_plan_shape(plan_shape: str) -> str:
    if plan_shape not in PLAN_SHAPES:
        raise DatasetError(f'plan shape must be "steps" or "subquestions", got {plan_shape!r}.')
    return plan_shape


def memories_text(successful: list[dict], failed: list[dict], plan_shape: str = "steps") -> str:
    """Retrieved memories (backend.manager.memory_to_dict) as the app's Planner is shown them: the
    contrastive memories for a plan of steps, the worked examples among them for sub-questions."""
    if check_plan_shape(plan_shape) == "subquestions":
        return worked_examples_shown(successful, failed)
    return format_memories(successful, failed)


def store_memory_lookup(store, namespace: str, k: int = 2, plan_shape: str = "steps") -> MemoryLookup:
    """Contrastive memories from a `memory_db.MemoryStore`, shown as the Planner's prompt shows them
    for `plan_shape`."""
    from backend.manager import memory_to_dict

    check_plan_shape(plan_shape)

    def lookup(question: str) -> str:
        found = store.search_contrastive(question, namespace=namespace, k=k)
        return memories_text([memory_to_dict(m) for m in found.successful], [memory_to_dict(m) for m in found.failed],
                             plan_shape)

    return lookup


def no_memories(question: str) -> str:
    return format_memories([], [])


def no_worked_examples(question: str) -> str:
    """A plan of sub-questions without memories: the Planner sees only its fixed examples."""
    return ""


def empty_memories(plan_shape: str = "steps") -> MemoryLookup:
    """The lookup of an empty memory for the plan shape (no_memories or no_worked_examples)."""
    return no_worked_examples if check_plan_shape(plan_shape) == "subquestions" else no_memories


def with_memories(items: Iterable[QuestionItem], lookup: MemoryLookup) -> list[QuestionItem]:
    return [item if item.memory_context else replace(item, memory_context=lookup(item.question)) for item in items]


def persons_record(item: QuestionItem, plan_shape: str) -> RLRecord:
    """An item whose run followed the person's plan, with that plan: the person's example."""
    return RLRecord(item.question, item.ground_truth, item.source, item.memory_context, plan_text(item.person_plan),
                    list(item.person_plan), plan_shape, PERSON)


def stage2_records(items: Iterable[QuestionItem], plan_shape: str = "steps") -> list[RLRecord]:
    """The Planner's questions; one whose run followed a person's plan carries that plan as their example."""
    check_plan_shape(plan_shape)
    return [persons_record(i, plan_shape) if i.person_plan else
            RLRecord(i.question, i.ground_truth, i.source, i.memory_context, plan_shape=plan_shape) for i in items]


def stage1_records(items: Iterable[QuestionItem], planner: Planner, tools_text: str,
                   plan_shape: str = "steps") -> list[RLRecord]:
    """Each question with the plan the current Planner writes for it (greedy, as the app would): a
    plan of steps (`Planner.plan`), or for "subquestions" its decomposition (`Planner.decompose` after
    the item's worked examples), whose hops the Executor then researches one by one."""
    check_plan_shape(plan_shape)
    records = []
    for item in items:
        if item.person_plan:  # the person's plan, not the Planner's: the Executor learns to follow it
            records.append(persons_record(item, plan_shape))
            continue
        if plan_shape == "subquestions":
            blueprint = planner.decompose(Question.parse(item.question), item.memory_context)
        else:
            blueprint = planner.plan(item.question, item.memory_context, tools_text)
        records.append(RLRecord(item.question, item.ground_truth, item.source, item.memory_context,
                                blueprint.text, list(blueprint.steps), plan_shape))
    return records


def _read_feedback(data_dir: Path, namespace: str, memory_url: str | None = None) -> dict[str, dict]:
    """run id -> {"ground_truth", "rating"} from the app's learning queue; later feedback wins."""
    from backend.feedback import open_feedback_queue
    from memory_db import MemoryStore, MemoryStoreError

    url = memory_url or f"sqlite:///{Path(data_dir) / 'memory.sqlite'}"
    try:
        store = MemoryStore(url)
    except MemoryStoreError as problem:
        raise DatasetError(f"The app's memory database ({url}) cannot be opened: {problem}") from None
    try:
        queue = open_feedback_queue(store, Path(data_dir), writable=False)
        items = queue.items(namespace=namespace)
    except ValueError as problem:
        raise DatasetError(f"The learning queue in {url} has a damaged entry ({problem}); delete that row or "
                           "restore the database.") from None
    finally:
        store.close()
    feedback: dict[str, dict] = {}
    for item in items:
        note = feedback.setdefault(item.run_id, {})
        if item.right_answer:
            note["ground_truth"] = item.right_answer
        if item.thumbs:
            note["rating"] = item.thumbs
    return feedback


def items_from_runs(data_dir: Path, namespace: str, memory_url: str | None = None,
                    plan_shape: str = "steps") -> list[QuestionItem]:
    """Finished runs of one namespace that carry a label (ground truth or thumbs-up), with the memories
    each run was shown, as the Planner is shown them for `plan_shape`; `memory_url`: the app's memory
    database when it is not the SQLite file in `data_dir`."""
    check_plan_shape(plan_shape)
    runlog = RunLog(Path(data_dir) / "runs")
    feedback = _read_feedback(Path(data_dir), namespace, memory_url)
    items = []
    for summary in runlog.list_runs(namespace, limit=100_000):
        run = replay(runlog.load(namespace, summary.run_id))
        if run.started is None or run.failure is not None or not run.answers:
            continue
        note = feedback.get(summary.run_id, {})
        truth = note.get("ground_truth") or run.started.ground_truth or (run.verdict.ground_truth if run.verdict else None)
        if not truth and note.get("rating") == "up" and run.answer.strip():
            truth = run.answer.strip()
        if not truth:
            continue
        memories = run.memories
        context = memories_text(memories.successful, memories.failed, plan_shape) if memories else ""
        items.append(QuestionItem(run.question, truth, f"run:{namespace}/{summary.run_id}", context,
                                  persons_plan(run, plan_shape)))
    return items


@dataclass
class VerifiedRun:
    """A finished run whose answer a person verified: `answer` is the typed right answer, or the run's
    own answer given a thumbs-up; with the queries it searched and the passages they returned."""

    source: str  # "run:<namespace>/<run id>"
    question: str
    answer: str
    queries: list[str]
    passages: list[dict]


def verified_runs(data_dir: Path, namespace: str, memory_url: str | None = None) -> list[VerifiedRun]:
    """The runs of one namespace a person verified (a typed answer, or a thumbs-up on the answer)."""
    runlog = RunLog(Path(data_dir) / "runs")
    feedback = _read_feedback(Path(data_dir), namespace, memory_url)
    found = []
    for summary in runlog.list_runs(namespace, limit=100_000):
        note = feedback.get(summary.run_id, {})
        if not note:
            continue
        run = replay(runlog.load(namespace, summary.run_id))
        if run.started is None or run.failure is not None or not run.answers:
            continue
        answer = note.get("ground_truth") or (run.answer.strip() if note.get("rating") == "up" else "")
        if not answer:
            continue
        found.append(VerifiedRun(f"run:{namespace}/{summary.run_id}", run.question, answer,
                                 run.search_queries, run.retrieved_passages))
    return found


def persons_plan(run, plan_shape: str) -> list[str]:
    """The plan a person reviewed and ran (backend.plan_review), when it is of `plan_shape` (a plan of
    sub-questions is researched hop by hop, so its run has hops); [] for the Planner's."""
    person = next((plan for plan in run.plans if plan.source == PERSON and plan.revision == 0), None)
    if person is None or ("subquestions" if run.hops else "steps") != plan_shape:
        return []
    return list(person.steps)


def write_records(records: list[RLRecord], path: Path) -> Path:
    import pandas as pd

    if not records:
        raise DatasetError("No usable questions; add labelled runs or a questions file.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([asdict(r) for r in records]).to_parquet(path, index=False)
    return path


def read_records(path: Path) -> list[RLRecord]:
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path} does not exist; build it with `python -m training dataset ...` first.")
    frame = pd.read_parquet(path)
    missing = {"question", "ground_truth", "source"} - set(frame.columns)
    if missing:
        raise DatasetError(f"{path} lacks the columns {', '.join(sorted(missing))}; rebuild the dataset.")
    records = []
    for number, row in enumerate(frame.to_dict(orient="records"), 1):
        shape = row.get("plan_shape") or "steps"  # a file from before the field holds plans of steps
        if shape not in PLAN_SHAPES:
            raise DatasetError(f'{path}, row {number}: plan_shape must be "steps" or "subquestions", got {shape!r}; '
                               "rebuild the dataset.")
        records.append(RLRecord(
            question=row["question"], ground_truth=row["ground_truth"], source=row["source"],
            memory_context=row.get("memory_context") or "", plan_text=row.get("plan_text") or "",
            plan_steps=[str(s) for s in (row.get("plan_steps") if row.get("plan_steps") is not None else [])],
            plan_shape=shape, plan_source=row.get("plan_source") or "planner",
        ))
    return records
