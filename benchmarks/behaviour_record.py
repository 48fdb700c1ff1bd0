"""Record what the loop does on a fixed set of runs, to show that a refactoring changed nothing.

Every model call (its kind, messages, options, stop strings, prefill, limits and reply) and every
event of a fixed script of runs on the embedded SmolLM2-135M (greedy, deterministic on one machine)
is written as one JSON line, with run and memory ids, times and durations replaced by stable names.
The script covers: the baselines, the full loop with steps plans and with sub-question plans,
memories of earlier runs retrieved, and a typed correction recalled by the next run.

    .venv/bin/python benchmarks/behaviour_record.py --out before.jsonl
    (change the code)
    .venv/bin/python benchmarks/behaviour_record.py --out after.jsonl --compare before.jsonl

`--compare` prints the first line that differs and exits 1, or says the recordings are identical.
About 3 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

QUESTIONS_FILE = REPO / "data" / "hotpotqa" / "train.jsonl"
SCRIPT = (  # (question index in train, method, plan shape, ground truth given)
    (0, "none", "steps", True),
    (1, "rag", "steps", True),
    (2, "plan", "steps", True),
    (0, "mia", "steps", True),
    (1, "mia", "steps", True),
    (0, "mia", "steps", True),  # retrieves the memory of its own first run
    (2, "mia", "subquestions", True),
    (3, "mia", "subquestions", True),
    (4, "mia", "steps", False),  # answered without ground truth, then taught ...
    (4, "mia", "steps", False),  # ... and recalled
)
HEX_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\b[0-9a-f]{12,32}\b")
DATE = re.compile(r"\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4}\b|\b\d{4}-\d\d-\d\d(?:T[\d:.]+Z?)?")
VOLATILE_KEYS = {"at", "created_at", "updated_at"}  # and every key ending in "seconds"


class Recorder:
    """Lines in order; ids are renamed in order of first appearance so that two runs compare."""

    def __init__(self) -> None:
        self.lines: list[dict] = []
        self._names: dict[str, str] = {}

    def _rename(self, match: re.Match) -> str:
        return self._names.setdefault(match.group(0), f"<id{len(self._names) + 1}>")

    def clean(self, value):
        if isinstance(value, dict):
            return {k: self.clean(v) for k, v in value.items() if k not in VOLATILE_KEYS and not k.endswith("seconds")}
        if isinstance(value, list | tuple):
            return [self.clean(v) for v in value]
        if isinstance(value, str):
            return DATE.sub("<date>", HEX_ID.sub(self._rename, value))
        if isinstance(value, float):
            return round(value, 4)
        return value

    def add(self, record: dict) -> None:
        self.lines.append(self.clean(record))


class RecordingModel:
    """A ChatModel that writes each call and its reply to the recorder."""

    def __init__(self, inner, role: str, recorder: Recorder) -> None:
        self._inner, self._role, self._recorder = inner, role, recorder

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def generate(self, messages, **options):
        completion = self._inner.generate(messages, **options)
        self._recorder.add({"call": "generate", "role": self._role, "messages": messages, "options": options,
                            "reply": completion.text, "finish": completion.finish_reason})
        return completion

    def stream(self, messages, **options):
        final = None
        for piece in self._inner.stream(messages, **options):
            if not isinstance(piece, str):
                final = piece
            yield piece
        self._recorder.add({"call": "stream", "role": self._role, "messages": messages, "options": options,
                            "reply": final.text if final else None, "finish": final.finish_reason if final else None})

    def choose(self, messages, options, **kwargs):
        choice = self._inner.choose(messages, options, **kwargs)
        self._recorder.add({"call": "choose", "role": self._role, "messages": messages, "options": list(options),
                            "kwargs": kwargs, "label": choice.label, "method": choice.method})
        return choice


def record(out: Path) -> list[dict]:
    from backend.agent import ResearchAgent, RunRequest
    from backend.config import RoleConfig, load_config
    from backend.eval.runner import seed_everything
    from backend.feedback import FeedbackQueue, submit_feedback
    from backend.judge import Judge
    from backend.llm.embedded import get_embedded_model, prepare_embedded_model
    from backend.runlog import RunLog
    from backend.tools import build_tools
    from backend.tools.base import offered_tools, query_tool
    from memory_db import MemoryStore, get_embedder

    questions = [json.loads(line) for line in QUESTIONS_FILE.read_text(encoding="utf-8").splitlines()[:5]]
    base = load_config(environ={})
    model_dir = prepare_embedded_model(base.model_cache_dir, progress=False)
    model = get_embedded_model(model_dir)
    recorder = Recorder()
    embedder = get_embedder()
    tools = build_tools(cache_dir=base.index_cache_dir, web_enabled=False, progress=False, embedder=None)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        role = RoleConfig(backend="embedded", max_new_tokens=48)
        store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
        runlog = RunLog(tmp_path / "runs")
        models = {name: RecordingModel(model, name, recorder) for name in base.roles}
        for index, method, shape, with_truth in SCRIPT:
            config = replace(base, data_dir=tmp_path, roles={name: role for name in base.roles},
                             agent=replace(base.agent, max_turns=2, reflections=1, plan_shape=shape,
                                           sparse_memory_planner="planner"))
            agent = ResearchAgent(config, models=models, tools=tools, store=store, runlog=runlog)
            question = questions[index]
            seed_everything(0)
            recorder.add({"run": {"question": index, "method": method, "plan_shape": shape}})
            run_id = None
            for event in agent.run(RunRequest(question["question"], ground_truth=question["answer"] if with_truth
                                              else None, method=method)):
                run_id = event.run_id
                recorder.add({"event": event.to_dict()})
            if not with_truth:
                outcome = submit_feedback(
                    store=store, runlog=runlog, judge=Judge(models["judge"]), queue=FeedbackQueue(store),
                    namespace="default", run_id=run_id, user="recorder", right_answer=question["answer"],
                    search=query_tool(offered_tools(tools, has_image=False, namespace="default")),
                )
                recorder.add({"feedback": {"before": outcome.label_before, "after": outcome.label_after}})
        store.close()
    text = "".join(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n" for line in recorder.lines)
    out.write_text(text, encoding="utf-8")
    return recorder.lines


def compare(a: Path, b: Path) -> int:
    left = a.read_text(encoding="utf-8").splitlines()
    right = b.read_text(encoding="utf-8").splitlines()
    for number, (x, y) in enumerate(zip(left, right, strict=False), start=1):
        if x != y:
            print(f"line {number} differs:\n  {a}: {x[:600]}\n  {b}: {y[:600]}")
            return 1
    if len(left) != len(right):
        print(f"{a} has {len(left)} lines, {b} has {len(right)}")
        return 1
    print(f"identical: {len(left)} lines")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path, help="a recording to compare the new one with")
    args = parser.parse_args()
    lines = record(args.out)
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()
    calls = sum(1 for line in lines if "call" in line)
    events = sum(1 for line in lines if "event" in line)
    print(f"{args.out}: {len(lines)} lines ({calls} model calls, {events} events), sha256 {digest}")
    return compare(args.compare, args.out) if args.compare else 0


if __name__ == "__main__":
    sys.exit(main())
