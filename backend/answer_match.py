"""How an answer's text is compared with another: SQuAD-style normalisation and whole-word containment.

Shared by the Judge, the evaluation metrics, rewards and the Executor's check that a draft answer is
stated in what it retrieved.
"""

from __future__ import annotations

import re
import string


def normalize_answer(text: str) -> str:
    """SQuAD-style normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


_DASHES = str.maketrans({dash: "-" for dash in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"})


def answer_contains(answer: str, gold: str) -> bool:
    """True when the normalised gold answer appears as whole words in the normalised answer. A dash
    is a dash whatever its kind: "1844-1846" as a reader writes it is what "(1844–1846)" states."""
    a, g = normalize_answer(answer.translate(_DASHES)), normalize_answer(gold.translate(_DASHES))
    if not a or not g:
        return False
    return a == g or re.search(rf"(^| ){re.escape(g)}( |$)", a) is not None


_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                 "sixteen seventeen eighteen nineteen twenty").split()
_NUMBER_WORD = re.compile(rf"\b({'|'.join(_NUMBER_WORDS)})\b", re.IGNORECASE)


def with_numerals(text: str) -> str:
    """Number words up to twenty written as digits ("five months" -> "5 months")."""
    return _NUMBER_WORD.sub(lambda m: str(_NUMBER_WORDS.index(m.group(1).lower())), text)


def same_answer_contained(answer: str, gold: str) -> bool:
    """`answer_contains`, whether a number is written as a word or in digits ("1" for "one"): what a
    grader means by the answer holding the gold one. Kept apart from `answer_contains`, which also
    checks where a retrieved sentence states an answer: there "one" is as often no number at all."""
    return answer_contains(answer, gold) or answer_contains(with_numerals(answer), with_numerals(gold))


def _words(text: str) -> set[str]:
    """Normalised words, each also without a plural or possessive "s" ("Rockefeller's" meets "Rockefeller")."""
    words = set(normalize_answer(text).split())
    return words | {w[:-1] for w in words if len(w) > 3 and w.endswith("s")}


def shares_a_word(answer: str, gold: str) -> bool:
    return bool(_words(answer) & _words(gold))
