"""Reading examples for the Executor stage: the reader's own prompts, with the answer the supporting
facts give.

A small model loses most answers while reading paragraphs it already has (docs/results.md), so the
reader is trained on reading. Each example is one read of the app's reader, built by the app's own
code: an `ExecutorSession` searches a question's supporting titles with the app's search tool over
that question's ten HotpotQA paragraphs (the two gold ones among eight distractors retrieved for
it), then `read_answer` reads the answer exactly as a run reads it, from the same conversation,
with the same requests and prefills. The model it reads with is `GoldReader`, which writes what the
supporting facts say: the sentence that states the answer, then the answer; for a comparison, each
option's fact, then the option. Every call the reader made becomes supervised text; a question is
kept only when the session's answer is the gold one and the quoted sentence stands in the prompt.

Sources (each row says its own): "supporting-facts" (this module), "trajectories" (the app's own
sampled runs judged right, training.reader_trajectories) and "verified-runs" (what a deployment's
users confirmed or typed, training.reader_trajectories). Rows:

    {"id", "question", "answer", "source", "split": "train" | "validation",
     "messages": [...], "segments": [{"text": ..., "train": bool}, ...]}

`segments` is the assistant's turn after the prompt: the app's prefills (not trained) and the
reader's own text (trained), in order; the turn's end is marked by `"end": true` on the last one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from backend.answer_match import answer_contains, normalize_answer
from backend.config import AgentConfig
from backend.eval.losses import record_supporting_titles
from backend.executor import ExecutorSession
from backend.llm.base import Choice, Completion, ModelTraits
from backend.llm.reader_adapter import file_sha256
from backend.metering import RunMeter
from backend.prompts import executor as prompts
from backend.question import Question
from backend.tools.corpus import HOTPOTQA_SOURCE, Document
from backend.tools.search import WikiSearchTool
from backend.tools.wiki_index import WikiIndex, bm25_retriever

SOURCES = ("supporting-facts", "trajectories", "verified-runs")
QUOTE_WORDS = 30  # a quote longer than this is cut to the words around the answer (the app lets it 48 tokens)
FACT_WORDS = 16  # an option's fact (the app lets it 28 tokens)
VALIDATION_SHARE = 0.1
CANARY_ROWS = 10  # train's last rows: the test-time learning canary (data/ttrl/canary.jsonl), never trained on


class ReaderDataError(ValueError):
    """The examples cannot be built or read; the message says what to do."""


@dataclass
class Call:
    """One call the reader made: its prompt, the prefill the app gave, and what GoldReader wrote."""

    messages: list[dict]
    prefill: str
    text: str
    ends_turn: bool


@dataclass
class ReadingExample:
    id: str
    question: str
    answer: str
    source: str
    messages: list[dict]
    segments: list[dict] = field(default_factory=list)
    split: str = "train"

    def to_row(self) -> dict:
        return {"id": self.id, "question": self.question, "answer": self.answer, "source": self.source,
                "split": self.split, "messages": self.messages, "segments": self.segments}


def reader_traits(model: str) -> ModelTraits:
    """The traits the Executor's model declares, which decide how the reader reads (a larger model
    from its conversation, by quote; a small one from selected evidence), without loading it."""
    if model == "qwen":
        from backend.config import load_config

        return ModelTraits(small=False, guided_turns=True, context_tokens=load_config().role("executor").context_tokens,
                           executor_turns=4)
    if model in ("smollm2", "tiny-random"):
        from backend.llm.embedded import EMBEDDED_TRAITS

        return EMBEDDED_TRAITS
    raise ReaderDataError(f"unknown model {model!r}; use qwen, smollm2 or tiny-random.")


class OffScript(Exception):
    """The reader asked for something the supporting facts do not give."""


def split_of(question_id: str, share: float = VALIDATION_SHARE) -> str:
    """"validation" for a fixed share of questions (by a hash of the id, so a question never moves)."""
    bucket = int(hashlib.sha256(question_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "validation" if bucket < share else "train"


def context_documents(record: dict) -> list[Document]:
    context = record.get("context") or {}
    titles, sentences = context.get("title") or [], context.get("sentences") or []
    return [Document(title=t, text="".join(s).strip(), source=HOTPOTQA_SOURCE) for t, s in zip(titles, sentences)]


def context_search(record: dict) -> WikiSearchTool:
    """The app's search tool over the question's own ten paragraphs (HotpotQA's distractor setting)."""
    documents = context_documents(record)
    if not documents:
        raise ReaderDataError(f"question {record.get('id')!r} has no context paragraphs; use HotpotQA records.")
    return WikiSearchTool(WikiIndex(documents, bm25_retriever(documents)))


def supporting_sentences(record: dict) -> dict[str, list[str]]:
    """The supporting sentences of each supporting title, in order."""
    by_title = dict(zip((record.get("context") or {}).get("title") or [], (record.get("context") or {}).get("sentences") or []))
    facts = record.get("supporting_facts") or {}
    found: dict[str, list[str]] = {}
    for title, sent_id in zip(facts.get("title") or [], facts.get("sent_id") or []):
        sentences = by_title.get(title) or []
        if 0 <= sent_id < len(sentences):
            found.setdefault(title, []).append(" ".join(sentences[sent_id].split()))
    return found


def _window(sentence: str, answer: str, max_words: int) -> str:
    """At most `max_words` of the sentence, the answer inside: from its start when the answer is early
    enough, else ending a few words after the answer."""
    words = sentence.split()
    if len(words) <= max_words:
        return sentence
    answer_words = answer.split()
    for end in range(len(answer_words), len(words) + 1):
        if answer_contains(" ".join(words[max(0, end - len(answer_words) - 2):end]), answer):
            stop = min(len(words), max(max_words, end + 3))
            return " ".join(words[max(0, stop - max_words):stop])
    return " ".join(words[:max_words])


def answer_sentence(record: dict) -> str:
    """The supporting sentence that states the answer (the last one that holds it), cut to QUOTE_WORDS."""
    answer = record["answer"]
    holding = [s for sentences in supporting_sentences(record).values() for s in sentences if answer_contains(s, answer)]
    return _window(holding[-1], answer, QUOTE_WORDS) if holding else ""


def option_fact(record: dict, option: str) -> str:
    """The supporting sentence about a compared option (its paragraph's title names it), cut to
    FACT_WORDS around the first number in it (what a comparison of dates or amounts turns on)."""
    key = normalize_answer(option)
    for title, sentences in supporting_sentences(record).items():
        if key and (key in normalize_answer(title) or normalize_answer(title) in key):
            sentence = " ".join(sentences)
            number = re.search(r"\d[\d,.]*", sentence)
            return _window(sentence, number.group() if number else "", FACT_WORDS)
    raise OffScript(f"no supporting sentence is about the option {option!r}")


class GoldReader:
    """A ChatModel that writes the known reading wherever the reader asks, and keeps every call: the
    sentence that states the answer, the answer, and for a comparison each option's fact (`fact_of`).
    It declares the traits of the model being trained, so the session reads as it reads with that
    model (a larger model: from its conversation, by quote)."""

    supports_images = False

    def __init__(self, question: Question, answer: str, sentence: str, traits: ModelTraits,
                 fact_of: Callable[[str], str] | None = None, name: str = "gold-reader") -> None:
        self.traits, self.name = traits, name
        self.answer = " ".join(answer.split())
        self.sentence = sentence
        self.fact_of = fact_of
        self.options = {o.casefold(): o for o in question.choices}
        self.calls: list[Call] = []

    def _write(self, messages: list[dict], prefill: str) -> str:
        if prefill.endswith(prompts.QUOTE_PREFILL):
            if not self.sentence:
                raise OffScript("no supporting sentence states the answer")
            return " " + self.sentence
        if prefill.endswith(prompts.ANSWER_PREFILL):
            return " " + self.answer
        option = prefill.rsplit("\n", 1)[-1].removesuffix(":")
        if option.casefold() in self.options and self.fact_of is not None:
            return " " + self.fact_of(option)
        raise OffScript(f"the reader asked for {prefill[-40:]!r}")

    def generate(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
                 prefill: str = "", temperature: float = 0.0, logprobs: int | None = None) -> Completion:
        text = self._write(messages, prefill)
        self.calls.append(Call(messages, prefill, text, ends_turn=False))
        return Completion(text=text, prompt_tokens=0, completion_tokens=0, seconds=0.0, finish_reason="stop")

    def stream(self, messages: list[dict], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
               prefill: str = "", temperature: float = 0.0, logprobs: int | None = None) -> Iterator[str | Completion]:
        text = self._write(messages, prefill)
        self.calls.append(Call(messages, prefill, text, ends_turn=True))
        yield text
        yield Completion(text=text, prompt_tokens=0, completion_tokens=0, seconds=0.0, finish_reason="stop")

    def choose(self, messages: list[dict], options: Sequence[str], *, prefill: str = "") -> Choice:
        gold = normalize_answer(self.answer)
        label = next((o for o in options if normalize_answer(o) == gold), None)
        if label is None:
            raise OffScript(f"the gold answer {self.answer!r} is none of the options {list(options)}")
        self.calls.append(Call(messages, prefill, " " + label, ends_turn=False))
        return Choice(label=label, logprobs={o: 0.0 if o == label else -10.0 for o in options}, method="gold")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def merged_reads(calls: list[Call]) -> list[tuple[list[dict], list[dict]]]:
    """(messages, segments) per read: calls on the same prompt whose prefill continues the last call's
    text (the quote, then "Answer:"; each option's fact, then the choice) are one assistant turn."""
    reads: list[tuple[list[dict], list[dict], str]] = []  # messages, segments, the turn's text so far
    for call in calls:
        if reads and reads[-1][0] == call.messages and call.prefill.startswith(reads[-1][2]):
            messages, segments, so_far = reads[-1]
        else:
            messages, segments, so_far = call.messages, [], ""
            reads.append((messages, segments, so_far))
        if call.prefill[len(so_far):]:
            segments.append({"text": call.prefill[len(so_far):], "train": False})
        segments.append({"text": call.text, "train": True, **({"end": True} if call.ends_turn else {})})
        reads[-1] = (messages, segments, call.prefill + call.text)
    return [(messages, segments) for messages, segments, _ in reads]


def _says_not_the_answer(messages: list[dict], answer: str) -> bool:
    return prompts.NOT_THE_ANSWER.format(answer=answer) in str(messages[-1].get("content", ""))


def _prompt_text(messages: list[dict]) -> str:
    return " ".join(" ".join(str(m.get("content", "")) for m in messages).split())


def gold_reads(question: Question, gold: GoldReader, search: WikiSearchTool, queries: list[str],
               agent: AgentConfig = AgentConfig()) -> list[tuple[list[dict], list[dict]]]:
    """The app's session searches `queries` with `search`, then reads the answer with `gold`; the
    reads (messages, segments), or [] when the reading asks for what `gold` does not know, the
    session's answer is not the gold one, or a quoted sentence is not in the prompt it was quoted from."""
    session = ExecutorSession(gold, {"search": search}, RunMeter(), "reader-data", guided=True,
                              read_by_quote=agent.read_by_quote, follow_links=agent.follow_links)
    session.start(question, [])
    for query in queries:
        for _ in session.search("search", query):
            pass
    reading = session.read_answer(question)
    try:
        while True:
            next(reading)
    except StopIteration as done:
        answer = done.value or ""
    except OffScript:
        return []
    if normalize_answer(answer) != normalize_answer(gold.answer):
        return []
    reads = []
    for messages, segments in merged_reads(gold.calls):
        if _says_not_the_answer(messages, gold.answer):
            continue  # the app's read again of an answer the question names: the gold answer is that very name
        quotes = [s["text"] for s, prefill in zip(segments[1:], segments) if s["train"]
                  and prefill["text"].endswith(prompts.QUOTE_PREFILL)]
        if any(" ".join(q.split()) not in _prompt_text(messages) for q in quotes):
            return []
        reads.append((messages, segments))
    return reads


def reading_examples(record: dict, traits: ModelTraits, agent: AgentConfig = AgentConfig()) -> list[ReadingExample]:
    """The reader's reads of one HotpotQA question, its supporting titles searched over its own ten
    paragraphs, with what the supporting facts state."""
    question = Question.parse(" ".join(record["question"].split()))
    gold = GoldReader(question, record["answer"], answer_sentence(record), traits,
                      fact_of=lambda option: option_fact(record, option))
    queries = record_supporting_titles(record)
    if split_of(record["id"] + "/query", 0.5) == "validation" and not question.closed:
        queries = [question.text, *queries]  # as a model's first query often is: the question itself
    return [ReadingExample(record["id"], question.text, gold.answer, "supporting-facts", messages, segments,
                           split_of(record["id"]))
            for messages, segments in gold_reads(question, gold, context_search(record), queries, agent)]


def verified_run_examples(data_dir: Path, namespace: str, traits: ModelTraits, memory_url: str | None = None,
                          agent: AgentConfig = AgentConfig()) -> list[ReadingExample]:
    """What a deployment's users verified, as reading examples: each finished run with a person's typed
    right answer, or a thumbs-up on its answer (training.datasets.verified_runs), searched again with
    its own queries over the passages it retrieved, and read with the verified answer and the retrieved
    sentence that states it. A run no retrieved sentence states the answer of teaches no reading."""
    from backend.evidence import stating_sentence
    from training.datasets import verified_runs

    examples = []
    for run in verified_runs(Path(data_dir), namespace, memory_url):
        documents = list({(p["title"], p["text"]): Document(p["title"], p["text"], p.get("source") or "")
                          for p in run.passages if p.get("title") and p.get("text")}.values())
        sentence = _window(stating_sentence(run.answer, run.question, run.passages, max_chars=400), run.answer,
                           QUOTE_WORDS) if documents else ""
        question = Question.parse(run.question)
        if not sentence or question.closed:
            continue
        gold = GoldReader(question, run.answer, sentence, traits)
        search = WikiSearchTool(WikiIndex(documents, bm25_retriever(documents)))
        examples += [ReadingExample(run.source, run.question, gold.answer, "verified-runs", messages, segments,
                                    split_of(run.source))
                     for messages, segments in gold_reads(question, gold, search, run.queries, agent)]
    return examples


def read_records(paths: Iterable[Path], *, skip_last: dict[str, int] | None = None) -> list[dict]:
    """HotpotQA records of `paths`; `skip_last` leaves out the last N rows of a file named so (the
    test-time learning canary's rows of train)."""
    records = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise ReaderDataError(f"{path} does not exist; give HotpotQA JSONL files (data/hotpotqa/train.jsonl).")
        if "dev" in path.name:
            raise ReaderDataError(f"{path} is an evaluation split; build training examples from train files only.")
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        drop = (skip_last or {}).get(path.name, 0)
        records += rows[: len(rows) - drop] if drop else rows
    return records


def write_rows(rows: Iterable[dict], out: Path) -> str:
    """Writes JSON lines (written aside, then renamed); returns the file's sha256."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    partial.replace(out)
    return file_sha256(out)


def load_rows(path: Path) -> list[dict]:
    """Reading examples written by `write_rows` (or any source in the same form), checked."""
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            ok = (isinstance(row.get("messages"), list) and isinstance(row.get("segments"), list)
                  and any(s.get("train") for s in row["segments"]) and row.get("split") in ("train", "validation"))
        except (json.JSONDecodeError, AttributeError):
            ok = False
        if not ok:
            raise ReaderDataError(f"{path}:{number} is not a reading example (messages, segments with trained text, "
                                  "split); rebuild the file with `python -m training reader-data`.")
        rows.append(row)
    return rows
