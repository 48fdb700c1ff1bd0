"""English tokenisation (lower-case, stop words out, Snowball stems) and BM25 ranking of short texts.

Shared by the wiki index and the page-visit tool so that both read words the same way.
"""

from __future__ import annotations

import logging
import re
from functools import cache

import bm25s
import numpy as np
import Stemmer

logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets its logger to DEBUG: every ranking would log


@cache
def english_stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def tokenize(texts: list[str], *, progress: bool = False) -> list[list[str]]:
    """Stemmed content words of each text; a text of stop words only gives an empty list."""
    return bm25s.tokenize(
        texts, stopwords="en", stemmer=english_stemmer(), return_ids=False, show_progress=progress
    )


def rank_texts(texts: list[str], query: str) -> list[tuple[int, float]]:
    """Indices of `texts` that share a word with `query`, best BM25 score first."""
    query_tokens = tokenize([query])[0]
    if not texts or not query_tokens:
        return []
    text_tokens = tokenize(texts)
    if not any(text_tokens):
        return []
    retriever = bm25s.BM25()
    retriever.index(text_tokens, show_progress=False)
    known = [token for token in query_tokens if token in retriever.vocab_dict]
    if not known:
        return []
    scores = retriever.get_scores(known)
    order = np.argsort(-scores, kind="stable")
    return [(int(i), float(scores[i])) for i in order if scores[i] > 0]


# A sentence ends at . ! or ? before a capital, except after an initial ("Bun E. Carlos") or a title.
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\b[A-Z]\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bSt\.)(?<!\bJr\.)\s+(?=[A-Z0-9\"'(])")


def split_sentences(text: str) -> list[str]:
    return _SENTENCE_END.split(" ".join(text.split()))


def relevant_excerpt(text: str, query: str, limit: int) -> str:
    """`text` within `limit` characters: whole if it fits, else its first sentence (what the passage is
    about) and then the sentences that best match `query`, in their order, gaps marked with "…"."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    sentences = split_sentences(text)
    if len(sentences) < 2 or len(sentences[0]) >= limit:
        return shorten(text, limit)
    chosen, used = {0}, len(sentences[0])
    ranked = [i + 1 for i, _ in rank_texts(sentences[1:], query)]
    for i in ranked + [i for i in range(1, len(sentences)) if i not in ranked]:
        if used + len(sentences[i]) + 3 <= limit:
            chosen.add(i)
            used += len(sentences[i]) + 3
    parts, previous = [], -1
    for i in sorted(chosen):
        if previous >= 0 and i != previous + 1:
            parts.append("…")
        parts.append(sentences[i])
        previous = i
    if previous < len(sentences) - 1:
        parts.append("…")
    return shorten(" ".join(parts), limit)


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, at a word boundary when one is near, the cut marked."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit * 0.8 else cut) + "…"
