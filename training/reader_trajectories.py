"""The Executor's own verified trajectories (rejection sampling): the app's Executor answers each
training question k times, the first greedily and the rest sampled, and every call its model made in
a run the Judge grades right against the ground truth, with the answer stated in a retrieved
sentence, becomes supervised text in the same rows as training.reader_data's.

    python -m training reader-trajectories --k 4 --temperature 0.7 --out .mia/reader/trajectories.jsonl

Each question's rows are appended as it finishes and its outcome noted in `<out>.progress`, so a
stopped run goes on where it stopped. One model-heavy job at a time: it runs the llama.cpp model.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

from backend.agent import ResearchAgent, RunRequest
from backend.evidence import stating_sentence
from backend.llm.base import ChatModel, Choice, Completion
from backend import protocol
from backend.prompts import executor as prompts
from backend.replay import replay
from training.reader_data import Call, ReadingExample, merged_reads, split_of

NAMESPACE = "reader-trajectories"


def stop_written(text: str, stop: Sequence[str], completion: Completion) -> str:
    """The stop string the model wrote to end `text` (a completion's text leaves it out), as the
    protocol tells: the closing tag of a tag left open, or the quote that ends a prefilled query; ""
    when the model ended its turn or ran out of tokens."""
    if completion.finish_reason != "stop":
        return ""
    for opening, closing in ((protocol.ANSWER_OPEN, protocol.ANSWER_CLOSE), (protocol.CALL_OPEN, protocol.CALL_CLOSE),
                             (protocol.THINK_OPEN, protocol.THINK_CLOSE)):
        if closing in stop and text.rfind(opening) > text.rfind(closing):
            return closing
    return '"' if '"' in stop and text.count('"') % 2 == 1 else ""


class RecordingExecutor:
    """The Executor's model, every generation at `temperature` (0: greedy) and every constrained
    choice sampled from its options' probabilities at that temperature, each call kept."""

    def __init__(self, inner: ChatModel, temperature: float, seed: int) -> None:
        self.inner, self.temperature = inner, temperature
        self.name, self.traits, self.supports_images = inner.name, inner.traits, inner.supports_images
        self.random = random.Random(seed)
        self.calls: list[Call] = []

    def generate(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
                 prefill: str = "", temperature: float = 0.0, logprobs: int | None = None) -> Completion:
        extra = {"logprobs": logprobs} if logprobs is not None else {}
        completion = self.inner.generate(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill,
                                         temperature=self.temperature, **extra)
        self.calls.append(Call(messages, prefill, completion.text + stop_written(prefill + completion.text, stop, completion),
                               ends_turn=False))
        return completion

    def stream(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
               prefill: str = "", temperature: float = 0.0, logprobs: int | None = None) -> Iterator[str | Completion]:
        extra = {"logprobs": logprobs} if logprobs is not None else {}
        for item in self.inner.stream(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill,
                                      temperature=self.temperature, **extra):
            if isinstance(item, Completion):
                # An answer read after "Answer:" ends the reader's turn; other streams end at a stop string.
                ends = item.finish_reason == "stop" and prefill.endswith(prompts.ANSWER_PREFILL)
                written = "" if ends else stop_written(prefill + item.text, stop, item)
                self.calls.append(Call(messages, prefill, item.text + written, ends_turn=ends))
            yield item

    def choose(self, messages: list[dict], options: Sequence[str], *, prefill: str = "") -> Choice:
        choice = self.inner.choose(messages, options, prefill=prefill)
        if self.temperature > 0 and len(choice.logprobs) > 1:
            labels = list(choice.logprobs)
            top = max(choice.logprobs.values())
            weights = [math.exp((choice.logprobs[label] - top) / self.temperature) for label in labels]
            choice = Choice(label=self.random.choices(labels, weights)[0], logprobs=choice.logprobs, method="sampled")
        self.calls.append(Call(messages, prefill, " " + choice.label, ends_turn=False))
        return choice

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


def verified_trajectory(agent: ResearchAgent, record: dict, *, temperature: float, seed: int,
                        namespace: str = NAMESPACE) -> tuple[list[tuple[list[dict], list[dict]]], str]:
    """One run of the Executor alone (method "none") on `record`: (its model's reads, the answer) when
    the Judge grades it right against the ground truth and a retrieved sentence states the answer;
    ([], answer) otherwise."""
    recorder = RecordingExecutor(agent.models["executor"], temperature, seed)
    sampling = ResearchAgent(agent.config, models={**agent.models, "executor": recorder}, tools=agent.tools,
                             store=agent.store, runlog=None)
    run = replay(sampling.run(RunRequest(question=record["question"], namespace=namespace,
                                         ground_truth=record["answer"], method="none")))
    right = run.verdict is not None and run.verdict.label == "correct" and run.failure is None
    stated = bool(run.answer) and bool(stating_sentence(run.answer, record["question"], run.retrieved_passages))
    return (merged_reads(recorder.calls) if right and stated else []), run.answer


def sample_trajectories(agent: ResearchAgent, records: list[dict], out: Path, *, k: int = 4,
                        temperature: float = 0.7, progress: bool = True) -> dict:
    """Appends the verified trajectories of every record not yet done to `out` (JSON lines, rows as
    training.reader_data writes them); returns counts."""
    from tqdm.auto import tqdm

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ledger = out.with_name(out.name + ".progress")
    done = {json.loads(line)["id"] for line in ledger.read_text(encoding="utf-8").splitlines()} if ledger.is_file() else set()
    todo = [r for r in records if r["id"] not in done]
    counts = {"questions": 0, "runs": 0, "kept_runs": 0, "examples": 0, "already_done": len(done)}
    for record in tqdm(todo, desc="Trajectories", unit="question", disable=not progress):
        rows, kept, seen = [], 0, set()
        for sample in range(k):
            reads, answer = verified_trajectory(agent, record, temperature=0.0 if sample == 0 else temperature,
                                                seed=sample)
            counts["runs"] += 1
            key = json.dumps(reads, sort_keys=True)
            if not reads or key in seen:  # a wrong run, or one the greedy run already gave
                continue
            seen.add(key)
            kept += 1
            rows += [ReadingExample(record["id"], record["question"], record["answer"], "trajectories", messages,
                                    segments, split_of(record["id"])).to_row() for messages, segments in reads]
        with out.open("a", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
        with ledger.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"id": record["id"], "samples": k, "kept": kept, "examples": len(rows)}) + "\n")
        counts["questions"] += 1
        counts["kept_runs"] += kept
        counts["examples"] += len(rows)
    return counts
