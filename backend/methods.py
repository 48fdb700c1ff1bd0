"""The research methods as strategies: what memory a run reads, how it shows it, whether the Planner
plans and reflects, and how the run is stored. The episode loop (backend.episode) asks the method
and never tests its name.

mia = Manager + Planner + Executor with reflection; none = the Executor alone; plan = mia without
memory (the same prompts as mia with nothing retrieved: against mia, memory's own effect); rag =
raw past trajectories in the Executor's prompt; trace = compressed workflow summaries in the
Executor's prompt; memento = past cases (question, plan, outcome) shown to the Planner, in the
style of case-based planning agents, no reflection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from backend.prompts.manager import format_cases, format_memories, past_research_notes

Shown = Callable[[list[dict], list[dict]], str]


@dataclass(frozen=True)
class Method:
    name: str
    uses_memory: bool = False  # retrieves memories before the run and stores the run as one after it
    plans: bool = False
    reflects: bool = False
    show_to_planner: Shown | None = None  # the memories as the Planner's prompt text
    show_to_executor: Shown | None = None  # the memories as notes in the Executor's first turn
    compress: bool = True  # stored as a workflow summary (False: a plain case, plan + outcome)
    manager_plans_while_sparse: bool = True  # agent.sparse_memory_planner applies

    def planner_text(self, successful: list[dict], failed: list[dict]) -> str:
        return self.show_to_planner(successful, failed) if self.show_to_planner else ""

    def executor_notes(self, successful: list[dict], failed: list[dict]) -> str | None:
        return (self.show_to_executor(successful, failed) or None) if self.show_to_executor else None


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("mia", uses_memory=True, plans=True, reflects=True, show_to_planner=format_memories),
    Method("none"),
    Method("plan", plans=True, reflects=True, show_to_planner=format_memories),
    Method("rag", uses_memory=True, show_to_executor=lambda s, f: past_research_notes(s + f, raw=True)),
    Method("trace", uses_memory=True, show_to_executor=lambda s, f: past_research_notes(s + f, raw=False)),
    Method("memento", uses_memory=True, plans=True, show_to_planner=lambda s, f: format_cases(s + f),
           compress=False, manager_plans_while_sparse=False),
)}
METHOD_NAMES = tuple(METHODS)
