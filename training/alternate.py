"""Alternating the two stages, as the paper does: train the Executor, then the Planner against it.

Each round: (1) the current Planner writes plans for the questions and the Executor is trained
on them (stage 1); (2) the Planner is trained with the new Executor as its environment (stage 2).
The next round's plans come from the new Planner. Every round is appended to
`<output_dir>/rounds.jsonl` with its checkpoints and mean rewards. Both configs give one
`agent.plan_shape`: the plans are of that shape in both stages.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

from backend.llm.embedded import get_embedded_model
from backend.planner import Planner
from backend.tools.base import tool_names_line
from training.datasets import empty_memories, load_hotpotqa, stage1_records, stage2_records, with_memories, write_records
from training.grpo_config import GRPOSettings, TrainingConfigError
from training.trainer import resolve_model_dir, stage_tools, train_stage


@dataclass
class RoundRecord:
    round: int
    executor_checkpoint: str
    planner_checkpoint: str
    executor_mean_reward: list[float]
    planner_mean_reward: list[float]
    seconds: float


def alternate(executor_settings: GRPOSettings, planner_settings: GRPOSettings, rounds: int,
              output_dir: Path | None = None) -> list[RoundRecord]:
    if rounds < 1:
        raise ValueError("--rounds must be at least 1.")
    shape = executor_settings.plan_shape
    if planner_settings.plan_shape != shape:
        raise TrainingConfigError(f"the executor config's agent.plan_shape is {shape!r} and the planner config's "
                                  f"{planner_settings.plan_shape!r}; alternating trains one plan shape, set both alike.")
    output = Path(output_dir or executor_settings.output_path / "alternation")
    cache = executor_settings.cache_path
    tools = stage_tools(executor_settings)
    items = with_memories(
        load_hotpotqa(executor_settings.resolve(executor_settings.questions_file), executor_settings.num_questions),
        empty_memories(shape),
    )
    executor_dir = str(resolve_model_dir(executor_settings.model_dir, cache, executor_settings))
    planner_dir = str(resolve_model_dir(planner_settings.model_dir, cache, planner_settings))
    history: list[RoundRecord] = []
    for number in range(1, rounds + 1):
        started = time.perf_counter()
        round_dir = output / f"round-{number}"
        planner = Planner(get_embedded_model(Path(planner_dir)), max_new_tokens=executor_settings.planner_max_new_tokens)
        plans = stage1_records(items, planner, tool_names_line(tools.values()), shape)
        write_records(plans, round_dir / "stage1.parquet")
        stage1 = train_stage(
            "executor", replace(executor_settings, model_dir=executor_dir, partner_model_dir=planner_dir),
            records=plans, tools=tools, output_dir=round_dir / "executor",
        )
        executor_dir = str(stage1.checkpoint)
        questions = stage2_records(items, shape)
        write_records(questions, round_dir / "stage2.parquet")
        stage2 = train_stage(
            "planner", replace(planner_settings, model_dir=planner_dir, partner_model_dir=executor_dir),
            records=questions, tools=tools, output_dir=round_dir / "planner",
        )
        planner_dir = str(stage2.checkpoint)
        record = RoundRecord(number, executor_dir, planner_dir, [s.mean_reward for s in stage1.steps],
                             [s.mean_reward for s in stage2.steps], time.perf_counter() - started)
        history.append(record)
        output.mkdir(parents=True, exist_ok=True)
        with (output / "rounds.jsonl").open("a", encoding="utf-8") as fp:
            fp.write(json.dumps(record.__dict__) + "\n")
    return history
