"""English tokenisation (lower-case, stop words out, Snowball stems) and BM25 ranking of short texts.

Shared by the wiki index and the page-visit tool so that both read words the same way.
"""

from __future__ import annotations

from functools import cache

import bm25s
import numpy as np
import Stemmer


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
