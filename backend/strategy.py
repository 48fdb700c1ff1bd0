"""A past workflow as a strategy, with its entities left out.

HotpotQA-style questions rarely share an entity, so a memory of another question helps only through
how it was researched: which searches, in which order, where the answer was found, and, for a
failure, what went wrong. The outline is read from the workflow record a memory keeps
(backend.manager.workflow_record) and names no page, person or place: each search is described by
where its query came from (the question's own words, or a name an earlier search found) and the
answer by where it stood.
"""

from __future__ import annotations

import re

from backend.answer_match import answer_contains, normalize_answer

ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
_STOPWORDS = frozenset(
    "a an the of in on at to for and or by with from is was were are be been did does do what which who whom "
    "whose when where why how that this these those as it its his her their".split()
)


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", normalize_answer(text)) if w not in _STOPWORDS}


def _ordinal(index: int) -> str:
    return ORDINALS[index] if index < len(ORDINALS) else f"#{index + 1}"


def query_origin(query: str, question: str, earlier_titles: list[list[str]]) -> str:
    """Where a search's query came from: a name an earlier search found, the question itself, words of
    the question, or words of its own."""
    words, asked = _content_words(query), _content_words(question)
    for index, titles in enumerate(earlier_titles):
        for title in titles:
            title_words = _content_words(title)
            if title_words and title_words <= words and not title_words <= asked:
                return f"a name the {_ordinal(index)} search found"
    if not words:
        return "an empty query"
    shared = len(words & asked) / len(words)
    if shared >= 0.8 and len(words) >= 0.7 * len(asked):
        return "the whole question"
    if shared >= 0.6:
        return "a name from the question"
    return "words of its own"


def _search_holding(title: str | None, searches: list[dict]) -> int | None:
    if not title:
        return None
    return next((i for i, s in enumerate(searches) if title in s.get("titles", [])), None)


def strategy_outline(question: str, workflow: dict, answer: str, correct: bool) -> str:
    """How a past question was researched and how it ended, naming none of its entities."""
    searches = [s for s in workflow.get("searches") or [] if s.get("queries")]
    if not searches:
        moves = "answered without searching"
    else:
        earlier: list[list[str]] = []
        origins = []
        for search in searches:
            origin = query_origin(str(search["queries"][0]), question, earlier)
            tool = search.get("tool") or "search"
            origins.append(origin if tool == "search" else f"{origin} (with {tool})")
            earlier.append([str(t) for t in search.get("titles") or []])
        moves = "searched for " + ", then for ".join(origins)
    held = _search_holding(workflow.get("support_title"), searches)
    parts = [moves]
    if correct:
        parts.append(f"the answer was stated in the {_ordinal(held)} search's results; it was right" if held is not None
                     else "the answer was right")
        return "; ".join(parts) + "."
    if not answer.strip():
        parts.append("no answer was given")
    else:
        found_by = next((i for i, s in enumerate(searches)
                         if any(answer_contains(str(t), answer) and answer_contains(answer, str(t))
                                for t in s.get("titles") or [])), None)
        if found_by is not None:
            parts.append(f"the answer given was the name of a page the {_ordinal(found_by)} search found, "
                         "a step on the way rather than what was asked")
        elif answer_contains(question, answer):
            parts.append("the answer given repeated a name from the question")
        else:
            parts.append("the answer given was wrong")
    gold = workflow.get("gold_retrieved")
    if gold is True:
        parts.append("the right answer was in the results but was not read from them")
    elif gold is False:
        parts.append("the right answer was in no result: a further search was needed")
    return "; ".join(parts) + "."
