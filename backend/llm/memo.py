"""A chat model that answers a greedy call it has already made from what it returned then.

Test-time learning runs several rollouts of one question with a frozen Executor: where two sampled
plans lead the Executor to the same prompt (a one-hop plan of sub-questions is never shown to it, so
every such rollout asks the same first turns), the greedy answer is the same, and computing it again
costs seconds of a 2-core CPU for nothing. The canary is the same case across versions: a version that
plans a canary question as its parent did sends the Executor its parent's prompts. Sampled calls
(temperature > 0) are always made.

`CallFile` keeps such answers on disk for other learners of the same frozen model: the stream
benchmark's variants (no learning, GRPO, RFT) ask the same questions in the same order, and where a
variant's Planner plans a question as another's did, its Executor asks what the other's already asked.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path

from backend.llm.base import ChatModel, Choice, Completion, TokenLogprob


class CallFile:
    """Greedy answers of one model kept in an append-only JSONL file, keyed by the call (hashed) and the
    model's name, so that another process asking the same of the same model reads the answer instead.
    A half-written last line (a process stopped mid-write) is ignored."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._answers: dict[str, Completion | Choice] = {}
        text = self.path.read_text(encoding="utf-8") if self.path.is_file() else ""
        self._ends_mid_line = bool(text) and not text.endswith("\n")  # the next answer starts a line of its own
        if text:
            for line in text.splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self._answers[row["key"]] = _answer_from(row)

    def __len__(self) -> int:
        return len(self._answers)

    @staticmethod
    def key(model_name: str, call_key: str) -> str:
        return hashlib.sha256(f"{model_name}\n{call_key}".encode()).hexdigest()

    def get(self, key: str) -> Completion | Choice | None:
        return self._answers.get(key)

    def put(self, key: str, answer: Completion | Choice) -> None:
        if key in self._answers:
            return
        self._answers[key] = answer
        row = {"key": key, "kind": "choice" if isinstance(answer, Choice) else "completion", **asdict(answer)}
        with self.path.open("a", encoding="utf-8") as file:
            file.write(("\n" if self._ends_mid_line else "") + json.dumps(row, ensure_ascii=False) + "\n")
            self._ends_mid_line = False
            file.flush()
            os.fsync(file.fileno())


def _answer_from(row: dict) -> Completion | Choice:
    fields = {k: v for k, v in row.items() if k not in ("key", "kind")}
    if row["kind"] == "choice":
        return Choice(**fields)
    logprobs = fields.pop("logprobs", None)
    tokens = [TokenLogprob(t["token"], t["logprob"], [tuple(pair) for pair in t["top"]]) for t in logprobs] \
        if logprobs is not None else None
    return Completion(**fields, logprobs=tokens)


class RepeatedCalls:
    """Wraps `model`; every attribute but the three calls is the model's own. Holds at most
    `max_entries` answers, the oldest dropped first; one instance should live as long as the calls
    it may repeat and the model stays the same (one question's rollouts; the canary's questions across
    Planner versions, the Executor being frozen), not longer. `shared`: a file of the same model's
    answers that other processes keep too, read on a miss and written with every answer."""

    def __init__(self, model: ChatModel, max_entries: int = 512, shared: CallFile | None = None) -> None:
        self.model = model
        self.max_entries = max_entries
        self.shared = shared
        self.hits = 0
        self._answers: OrderedDict[str, Completion | Choice] = OrderedDict()

    def __getattr__(self, name: str):
        return getattr(self.model, name)

    def generate(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
                 prefill: str = "", temperature: float = 0.0) -> Completion:
        if temperature > 0:
            return self.model.generate(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill,
                                       temperature=temperature)
        key = _key("generate", messages, max_new_tokens, list(stop), prefill)
        known = self._recall(key)
        if known is not None:
            return _repeated(known)
        completion = self.model.generate(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill)
        self._keep(key, completion)
        return completion

    def stream(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
               prefill: str = "", temperature: float = 0.0) -> Iterator[str | Completion]:
        if temperature > 0:
            yield from self.model.stream(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill,
                                         temperature=temperature)
            return
        # A streamed and a generated turn of the same prompt are the same greedy text.
        key = _key("generate", messages, max_new_tokens, list(stop), prefill)
        known = self._recall(key)
        if known is not None:
            if known.text:
                yield known.text
            yield _repeated(known)
            return
        for part in self.model.stream(messages, max_new_tokens=max_new_tokens, stop=stop, prefill=prefill):
            if isinstance(part, Completion):
                self._keep(key, part)
            yield part

    def choose(self, messages: list[dict], options: Sequence[str], *, prefill: str = "") -> Choice:
        key = _key("choose", messages, list(options), prefill)
        known = self._recall(key)
        if known is not None:
            return known
        choice = self.model.choose(messages, options, prefill=prefill)
        self._keep(key, choice)
        return choice

    def _recall(self, key: str):
        known = self._answers.get(key)
        if known is None and self.shared is not None:
            known = self.shared.get(self.shared.key(self.model.name, key))
            if known is not None:
                self._answers[key] = known
        if known is not None:
            self.hits += 1
            self._answers.move_to_end(key)
        return known

    def _keep(self, key: str, answer: Completion | Choice) -> None:
        self._answers[key] = answer
        if self.shared is not None:
            self.shared.put(self.shared.key(self.model.name, key), answer)
        while len(self._answers) > self.max_entries:
            self._answers.popitem(last=False)


def _key(*parts) -> str:
    return json.dumps(parts, sort_keys=True, default=repr)


def _repeated(completion: Completion) -> Completion:
    """The answer again, costing nothing: no seconds, every prompt token found."""
    return replace(completion, seconds=0.0, cached_tokens=completion.prompt_tokens)
