"""The learner's own files: pending signals and what each run taught (`state.json`), the scored batch
(`batch.jsonl`) and its logs (`signals.jsonl`, `updates.jsonl`). A worker's learner writes each inside
the lease's fence (see training.ttrl.learner), so one that lost the lease writes nothing."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

from training.policy import TurnSample
from training.ttrl.atomic_files import write_atomically, write_json_atomically


@dataclass
class _Group:
    """One signal's scored rollouts, kept until the GRPO update that uses them."""

    signal: dict
    rewards: list[float]
    samples: list[list[dict]] = field(default_factory=list)

    def episodes(self) -> list[list[TurnSample]]:
        return [[TurnSample(s["prompt_ids"], s["completion_ids"]) for s in rollout] for rollout in self.samples]


class LearnerFiles:
    """TestTimeLearner's reading and writing of its folder (`root`); `fence` is the worker's lease hold."""

    def _holding(self) -> AbstractContextManager:
        """The context this learner's file changes are made in: the lease's fence, when it holds one."""
        return self.fence.holding() if self.fence is not None else nullcontext()

    def _check_fence(self) -> None:
        if self.fence is not None:
            self.fence.verify()

    @property
    def _state_path(self) -> Path:
        return self.root / "state.json"

    @property
    def _batch_path(self) -> Path:
        return self.root / "batch.jsonl"

    def _read_state(self) -> dict:
        return json.loads(self._state_path.read_text(encoding="utf-8")) if self._state_path.exists() else {}

    def _save_state(self) -> None:
        write_json_atomically(self._state_path, {
            "paused": self.paused,
            "pending": [s.to_dict() for s in self.pending], "budget": self.budget.spent_times(),
            "learned_from": self.learned_from,
        }, self._holding)

    def _read_batch(self) -> list[_Group]:
        if not self._batch_path.exists():
            return []
        return [_Group(**json.loads(line)) for line in self._batch_path.read_text(encoding="utf-8").splitlines() if line]

    def _save_batch(self) -> None:
        write_atomically(self._batch_path, "".join(json.dumps(asdict(g)) + "\n" for g in self.batch), self._holding)

    def _log(self, name: str, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._holding(), (self.root / name).open("a", encoding="utf-8") as fp:
            fp.write(line)

    def read_log(self, name: str) -> list[dict]:
        path = self.root / name
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
