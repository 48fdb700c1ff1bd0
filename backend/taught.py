"""What a person taught: a right answer typed as feedback, or a thumbs up on an answer, kept with the
run's memory (its provenance) and recalled when the same or a reworded question comes again.

A correction is knowledge, so a later run answers with it at once, without a model call: the episode
searches for the taught answer beside the question's names, cites where a source states it, and
otherwise says it is the person's word, with no source yet. It is also a lesson in how: when the
correction arrives, `find_evidence` looks for where the corpus states the answer, and the memory keeps
that search, so a similar question's Planner sees what would have found it.

Recall is strict on purpose: a taught answer is given for a question only when the question is as
similar as a rewording (MiniLM cosine, `[agent] taught_min_similarity`), names the same things, word
for word (memory_db.named_things: "Super Bowl XLIX" is not "Super Bowl XLVIII", however similar), and
shares most of its words (`is_rewording`). "The capital of the country where the Colosseum stands"
names another monument, and "In which country is the Eiffel Tower?" asks something else about the
same one: neither gets the capital question's answer; each is researched, and the trace names the
similar taught question (`near_note`). Both thresholds were chosen on `train` rewordings and
near-misses (benchmarks/rewording_recall.py); benchmarks/taught_recall_bench.py measures recall
among many corrections.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from backend.events import ToolCalled, ToolReturned
from backend.evidence import is_about, stating_sentence
from backend.tools.base import Tool
from backend.tools.text_ranking import tokenize
from memory_db.named_things import name_the_same_things, names_missing, numbers
from memory_db.provenance import Provenance, provenance_update, read_provenance

if TYPE_CHECKING:
    from backend.question import Question

TYPED, THUMBS_UP = "typed", "thumbs up"
MAX_CANDIDATES = 5  # the most similar memories checked for a taught answer


@dataclass(frozen=True)
class TaughtAnswer:
    """A person's answer to a question, as recalled for a new one."""

    answer: str
    question: str  # the question it was taught for
    memory_id: str
    by: str
    at: float  # seconds since the epoch
    how: str  # TYPED | THUMBS_UP
    similarity: float
    evidence: dict | None = None  # {"query", "title", "sentence"}: where the corpus states it, found when taught
    changed: bool = True  # the person's answer is not the run's (a correction); False: they confirmed it

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TaughtAnswer:
        """As an event carries it (runs logged before `changed` was kept lack it)."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    @property
    def told(self) -> str:
        """'you corrected this on 4 Dec 2026: Paris'; typing the run's own answer, or a thumbs up,
        confirmed it: 'you confirmed this ...'."""
        verb = "corrected" if self.how == TYPED and self.changed else "confirmed"
        return f"{verb} this on {day_of(self.at)}: {self.answer}"

    @property
    def evidence_words(self) -> str:
        """What a recalled answer's verdict rests on, in words: 'the answer you typed on 7 Dec 2026'."""
        return (f"the answer you typed on {day_of(self.at)}" if self.how == TYPED
                else f"your thumbs up on {day_of(self.at)}")


def day_of(at: float) -> str:
    return datetime.fromtimestamp(at, tz=timezone.utc).strftime("%-d %b %Y")


def taught_fields(*, answer: str, user: str, at: float, how: str, evidence: dict | None) -> dict:
    """What a memory's provenance keeps of a person's answer (MemoryStore.record_verdict merges it)."""
    return provenance_update(taught_answer=answer, taught_by=user, taught_at=at, taught_how=how, taught_evidence=evidence)


MAX_TAUGHT_CHARS = 400  # a taught answer is a short span, as a right answer typed in the app is


def taught_of(provenance: Provenance) -> dict | None:
    """The taught fields of a memory's provenance (which may have come from an imported file): None
    when no person taught it an answer; an unknown way of teaching reads as typed, evidence without
    its three texts as none."""
    answer = provenance.taught_answer.strip()
    if not answer:
        return None
    evidence = provenance.taught_evidence
    keys = ("query", "title", "sentence")
    return {
        "answer": answer[:MAX_TAUGHT_CHARS],
        "by": provenance.taught_by,
        "at": provenance.taught_at,
        "how": provenance.taught_how if provenance.taught_how in (TYPED, THUMBS_UP) else TYPED,
        "evidence": ({k: evidence[k] for k in keys} if isinstance(evidence, dict)
                     and all(isinstance(evidence.get(k), str) for k in keys) else None),
    }


MIN_WORD_COVERAGE = 0.6  # share of each question's words the other holds (chosen on train rewordings and near-misses)


def _words(text: str) -> set[str]:
    """Stemmed content words and numbers."""
    return set(tokenize([text])[0]) | numbers(text)


def is_rewording(a: str, b: str) -> bool:
    """Whether two questions could be one question worded twice: they name the same things (names and
    numbers, word for word: memory_db.named_things), and each holds most of the other's words ("In
    which country is the Eiffel Tower?" is not the capital question reworded: it lacks "capital" and
    "city")."""
    if not name_the_same_things(a, b):
        return False
    words_a, words_b = _words(a), _words(b)
    shared = len(words_a & words_b)
    return min(shared / max(1, len(words_a)), shared / max(1, len(words_b))) >= MIN_WORD_COVERAGE


def why_not_a_rewording(question: str, taught: str) -> str:
    """What keeps `taught` from being `question` reworded, as a clause: the names each holds that
    the other lacks, or the words it lacks."""
    here, there = names_missing(question, taught), names_missing(taught, question)
    if here or there:
        parts = [f"this question names {', '.join(here)}" if here else "",
                 f"the taught one names {', '.join(there)}" if there else ""]
        return "; ".join(p for p in parts if p)
    return "it asks something else about the same things"


@dataclass(frozen=True)
class Recalled:
    """What memory holds for a question: the taught answer it is given (`taught`), or else the most
    similar question a person taught that is not this one (`near`, with `near_why`)."""

    taught: TaughtAnswer | None = None
    near: TaughtAnswer | None = None
    near_why: str = ""

    def near_dict(self) -> dict | None:
        return {**self.near.to_dict(), "why": self.near_why} if self.near else None


def recall(store, question: str, namespace: str, *, min_similarity: float, caption: str | None = None) -> Recalled:
    """The taught answer of the most similar memory whose question is a rewording of `question`
    (similar enough, naming the same things); without one, the most similar taught question that is
    not a rewording, named as a near miss. No model is called but the embedder."""
    found = store.search_contrastive(question, namespace=namespace, caption=caption, k=MAX_CANDIDATES,
                                     min_similarity=min_similarity, win_rate_weight=0.0, similarity_weight=1.0)
    near = None
    for scored in sorted(found.successful + found.failed, key=lambda s: -s.similarity):
        memory = scored.memory
        taught = taught_of(read_provenance(memory.provenance))
        if taught is None:
            continue
        answer = TaughtAnswer(answer=taught["answer"], question=memory.question, memory_id=memory.id, by=taught["by"],
                              at=float(taught["at"] or memory.updated_at.timestamp()), how=taught["how"],
                              similarity=round(float(scored.similarity), 4), evidence=taught["evidence"],
                              # a typed answer the Judge found the run's own to be left the memory correct
                              changed=taught["how"] == TYPED and not memory.correct)
        if is_rewording(question, memory.question):
            return Recalled(taught=answer)
        near = near or answer
    return Recalled(near=near, near_why=why_not_a_rewording(question, near.question) if near else "")


def evidence_queries(question: Question, answer: str, evidence: dict | None = None) -> list[str]:
    """Searches that look for where a source states `answer`: the search that found it when it was
    taught (`evidence`), the question's names alone (a one-hop answer stands in their page), then the
    answer beside them (the page of a second hop)."""
    names = " ".join(question.names) or question.text
    found = [evidence["query"]] if evidence and evidence.get("query") else []
    return list(dict.fromkeys([*found, names, f"{answer} {names}"]))


def stating_about(answer: str, question: Question, passages: list[dict]) -> str:
    """'Title: sentence' of the first passage whose sentence states `answer` about what the question asks
    (backend.evidence.is_about: "United States" taught for the Eiffel Tower is not stated by the Statue
    of Liberty's page), or ""."""
    for passage in passages:
        stated = stating_sentence(answer, question.text, [passage])
        title, _, sentence = stated.partition(": ")
        if stated and is_about(sentence, title, [question], answer):
            return stated
    return ""


def evidence_in_run(events: list, question: Question, answer: str) -> dict | None:
    """Where the run's own searches brought back a sentence stating `answer`: {"query", "title",
    "sentence"} of the first such search (its queries joined), or None."""
    if question.closed:
        return None
    queries = ""
    for event in events:
        if isinstance(event, ToolCalled):
            values = [v for v in event.arguments.values() if isinstance(v, (list, str))]
            queries = " ".join(" ".join(map(str, v)) if isinstance(v, list) else v for v in values)
        elif isinstance(event, ToolReturned) and event.ok:
            stated = stating_about(answer, question, event.passages)
            if stated and queries:
                title, _, sentence = stated.partition(": ")
                return {"query": queries, "title": title, "sentence": sentence}
    return None


def find_evidence(search: Tool | None, question: Question, answer: str) -> dict | None:
    """Where the corpus states `answer` for `question`: {"query", "title", "sentence"} of the first
    search that brings back a sentence stating it, or None (no search tool, a closed question, or no
    source states it)."""
    if search is None or question.closed or not search.capabilities.query_argument:
        return None
    for query in evidence_queries(question, answer):
        result = search({search.capabilities.query_argument: [query]})
        if not result.ok:
            continue
        stated = stating_about(answer, question, [asdict(p) for p in result.passages])
        if stated:
            title, _, sentence = stated.partition(": ")
            return {"query": query, "title": title, "sentence": sentence}
    return None


def answer_note(taught: dict) -> str:
    """What an answer given from a person's answer says about it (AnswerReady.taught)."""
    answer = TaughtAnswer.from_dict(taught)
    note = f"You {answer.told}."
    if taught.get("sources_say"):  # a run logged while an unconfirmed answer was researched again
        return (f"{note} The research found another answer, '{taught['sources_say']}', stated in "
                f"{taught.get('sources_sentence') or 'a retrieved passage'}: check which is right.")
    if taught.get("confirmed"):
        return f"{note} A retrieved source states it (cited below)."
    return f"{note} This is your word: no retrieved source states it yet."


def recall_note(taught: dict) -> str:
    """The trace's line for a recalled answer (MemoriesRetrieved.taught)."""
    answer = TaughtAnswer.from_dict(taught)
    asked = "this question" if answer.similarity >= 0.999 else f"“{answer.question}” (similarity {answer.similarity:.2f})"
    return f"You {answer.told} (for {asked}); the answer is given from it."


def near_note(near: dict) -> str:
    """The trace's line for a similar taught question that is not this one (MemoriesRetrieved.near_taught)."""
    answer = TaughtAnswer.from_dict(near)
    return (f"A similar question, “{answer.question}” (similarity {answer.similarity:.2f}), was taught the answer "
            f"'{answer.answer}'; it is not this question ({near.get('why') or 'it names other things'}), so this "
            "one is researched.")
