"""Our RL records as verl's RLHFDataset rows: chat prompt, data source, ground truth, extra info.

`agent_name` picks the agent loop per row (registered in training.verl_recipe.agent_loops).
`extra_info.plan_shape` is the record's plan shape and `extra_info.tools` the tools (agent.tools)
its prompt names, which the agent loops follow (a stage-1 row of "subquestions" holds the hops as
written in `plan_steps`). The Executor's `prompt` is its question turn with the plan; on
"subquestions" the policy's first call is its reading of the first hop, after the first search,
which the agent loop builds as the app does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from backend.config import DEFAULT_TOOLS
from training.datasets import STAGES, DatasetError, RLRecord
from training.verl_recipe.prompts import executor_prompt_messages

DATA_SOURCE = "mia/hotpotqa"
AGENT_LOOPS = {"executor": "mia_executor", "planner": "mia_planner"}


def verl_row(record: RLRecord, stage: str, tools: Sequence[str] = DEFAULT_TOOLS) -> dict:
    """`tools`: the names the Executor's prompt offers (agent.tools)."""
    if stage not in STAGES:
        raise DatasetError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}.")
    if stage == "executor":
        prompt = executor_prompt_messages(record.question, list(record.plan_steps), tools)
    else:  # the planner loop builds its prompts itself from extra_info; this message is for logging
        prompt = [{"role": "user", "content": record.question}]
    return {
        "data_source": DATA_SOURCE,
        "agent_name": AGENT_LOOPS[stage],
        "prompt": prompt,
        "reward_model": {"style": "rule", "ground_truth": record.ground_truth},
        "extra_info": {
            "question": record.question,
            "plan_steps": list(record.plan_steps),
            "plan_shape": record.plan_shape,
            "memory_context": record.memory_context,
            "source": record.source,
            "tools": list(tools),  # the agent loops offer the tools the prompt names
        },
    }


def write_verl_parquet(records: list[RLRecord], stage: str, path: Path, *, tools: Sequence[str] = DEFAULT_TOOLS) -> Path:
    import pandas as pd

    if not records:
        raise DatasetError("No records to write; build the stage dataset first.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([verl_row(r, stage, tools) for r in records]).to_parquet(path, index=False)
    return path
