"""What a person taught: a right answer typed as feedback, or a thumbs up on an answer, kept with the
run's memory (its provenance) and recalled when the same or a reworded question comes again.

A correction is knowledge, so a later run starts from it: the episode searches for the taught answer
beside the question's names, cites where a source states it, and says it was told. It is also a
lesson in how: when the correction arrives, `find_evidence` looks for where the corpus states the
answer, and the memory keeps that search, so a similar question's Planner sees what would have
found it.

Recall is strict on purpose: a taught answer is given for a question only when the question is as
similar as a rewording (MiniLM cosine, `[agent] taught_min_similarity`), names only things the taught
one mentions, and shares most of its words (`is_rewording`). "The capital of the country where the
Colosseum stands" names another monument, and "In which country is the Eiffel Tower?" asks something
else about the same one: neither gets the capital question's answer. Both thresholds were chosen on
`train` rewordings and near-misses (benchmarks/rewording_recall.py).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from backend.events import ToolCalled, ToolReturned
from backend.evidence import closed_options, stating_sentence
from backend.evidence import named_phrases
from backend.tools.base import Tool
from backend.tools.text_ranking import tokenize

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

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def told(self) -> str:
        """'you corrected this on 4 Dec 2026: Paris' (a thumbs up: 'you confirmed this ...')."""
        verb = "corrected" if self.how == TYPED else "confirmed"
        return f"{verb} this on {day_of(self.at)}: {self.answer}"


def day_of(at: float) -> str:
    return datetime.fromtimestamp(at, tz=timezone.utc).strftime("%-d %b %Y")


def taught_fields(*, answer: str, user: str, at: float, how: str, evidence: dict | None) -> dict:
    """What a memory's provenance keeps of a person's answer (MemoryStore.record_verdict merges it)."""
    return {"taught_answer": answer, "taught_by": user, "taught_at": at, "taught_how": how,
            "taught_evidence": evidence}


MAX_TAUGHT_CHARS = 400  # a taught answer is a short span, as a right answer typed in the app is


def taught_of(provenance: dict) -> dict | None:
    """The taught fields of a memory's provenance, read as data that may have come from an imported
    file: None when no person taught it an answer; fields of the wrong type are left out."""
    answer = provenance.get("taught_answer")
    if not isinstance(answer, str) or not answer.strip():
        return None
    at = provenance.get("taught_at")
    evidence = provenance.get("taught_evidence")
    keys = ("query", "title", "sentence")
    return {
        "answer": answer.strip()[:MAX_TAUGHT_CHARS],
        "by": provenance["taught_by"] if isinstance(provenance.get("taught_by"), str) else "",
        "at": float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else None,
        "how": provenance["taught_how"] if provenance.get("taught_how") in (TYPED, THUMBS_UP) else TYPED,
        "evidence": ({k: evidence[k] for k in keys} if isinstance(evidence, dict)
                     and all(isinstance(evidence.get(k), str) for k in keys) else None),
    }


_NUMBER = re.compile(r"\b\d[\d,.]*\b")
# Words a reworded question may open with, capitalised only because they open it.
_OPENING_WORDS = ("name tell give identify find list state according among between both considering during after "
                  "before from by as with to this that these those it its there out regarding")
MIN_WORD_COVERAGE = 0.6  # share of each question's words the other holds (chosen on train rewordings and near-misses)


def _words(text: str) -> set[str]:
    """Stemmed content words and numbers."""
    return set(tokenize([text])[0]) | {n.replace(",", "").rstrip(".") for n in _NUMBER.findall(text)}


def question_names(question: str) -> set[str]:
    """The words of the things a question names (quoted titles, capitalised names, numbers), stemmed."""
    return _words(" ".join(named_phrases(question))) - _words(_OPENING_WORDS) | {
        n.replace(",", "").rstrip(".") for n in _NUMBER.findall(question)}


def is_rewording(a: str, b: str) -> bool:
    """Whether two questions could be one question worded twice: each names only things the other
    mentions, and each holds most of the other's words ("In which country is the Eiffel Tower?" is
    not the capital question reworded: it lacks "capital" and "city")."""
    words_a, words_b = _words(a), _words(b)
    if not question_names(a) <= words_b or not question_names(b) <= words_a:
        return False
    shared = len(words_a & words_b)
    return min(shared / max(1, len(words_a)), shared / max(1, len(words_b))) >= MIN_WORD_COVERAGE


def recall(store, question: str, namespace: str, *, min_similarity: float, caption: str | None = None) -> TaughtAnswer | None:
    """The taught answer of the most similar memory whose question is a rewording of `question`
    (similar enough, naming the same things), or None."""
    found = store.search_contrastive(question, namespace=namespace, caption=caption, k=MAX_CANDIDATES,
                                     min_similarity=min_similarity, win_rate_weight=0.0, similarity_weight=1.0)
    for scored in sorted(found.successful + found.failed, key=lambda s: -s.similarity):
        memory = scored.memory
        taught = taught_of(memory.provenance or {})
        if taught is None or not is_rewording(question, memory.question):
            continue
        return TaughtAnswer(answer=taught["answer"], question=memory.question, memory_id=memory.id, by=taught["by"],
                            at=float(taught["at"] or memory.updated_at.timestamp()), how=taught["how"],
                            similarity=round(float(scored.similarity), 4), evidence=taught["evidence"])
    return None


def evidence_queries(question: str, answer: str, evidence: dict | None = None) -> list[str]:
    """Searches that look for where a source states `answer`: the search that found it when it was
    taught (`evidence`), the question's names alone (a one-hop answer stands in their page), then the
    answer beside them (the page of a second hop)."""
    names = " ".join(named_phrases(question)) or question
    found = [evidence["query"]] if evidence and evidence.get("query") else []
    return list(dict.fromkeys([*found, names, f"{answer} {names}"]))


def evidence_in_run(events: list, question: str, answer: str) -> dict | None:
    """Where the run's own searches brought back a sentence stating `answer`: {"query", "title",
    "sentence"} of the first such search (its queries joined), or None."""
    if closed_options(question):
        return None
    queries = ""
    for event in events:
        if isinstance(event, ToolCalled):
            values = [v for v in event.arguments.values() if isinstance(v, (list, str))]
            queries = " ".join(" ".join(map(str, v)) if isinstance(v, list) else v for v in values)
        elif isinstance(event, ToolReturned) and event.ok:
            stated = stating_sentence(answer, question, event.passages)
            if stated and queries:
                title, _, sentence = stated.partition(": ")
                return {"query": queries, "title": title, "sentence": sentence}
    return None


def find_evidence(search: Tool | None, question: str, answer: str) -> dict | None:
    """Where the corpus states `answer` for `question`: {"query", "title", "sentence"} of the first
    search that brings back a sentence stating it, or None (no search tool, a closed question, or no
    source states it)."""
    if search is None or closed_options(question) or not search.capabilities.query_argument:
        return None
    for query in evidence_queries(question, answer):
        result = search({search.capabilities.query_argument: [query]})
        if not result.ok:
            continue
        stated = stating_sentence(answer, question, [asdict(p) for p in result.passages])
        if stated:
            title, _, sentence = stated.partition(": ")
            return {"query": query, "title": title, "sentence": sentence}
    return None


def answer_note(taught: dict) -> str:
    """What an answer given from a person's answer says about it (AnswerReady.taught)."""
    answer = TaughtAnswer(**{k: taught[k] for k in TaughtAnswer.__dataclass_fields__})
    note = f"You {answer.told}."
    if taught.get("sources_say"):
        return (f"{note} The research found another answer, '{taught['sources_say']}', stated in "
                f"{taught.get('sources_sentence') or 'a retrieved passage'}: check which is right.")
    if taught.get("confirmed"):
        return f"{note} A retrieved source states it (cited below)."
    return f"{note} No source searched states it."


def recall_note(taught: dict) -> str:
    """The trace's line for a recalled answer (MemoriesRetrieved.taught)."""
    answer = TaughtAnswer(**{k: taught[k] for k in TaughtAnswer.__dataclass_fields__})
    asked = "this question" if answer.similarity >= 0.999 else f"“{answer.question}” (similarity {answer.similarity:.2f})"
    return f"You {answer.told} (for {asked}); the research starts from it."
