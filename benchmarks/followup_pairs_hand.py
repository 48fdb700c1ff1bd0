"""Follow-up pairs written by hand, for benchmarks/followup_pairs.py.

Pairs written by hand are in `benchmarks/followup_pairs_hand.jsonl` (`hand_pairs`), one a line:
{"id", "question", "first_question", "bridge", "follow_up", "answer"}, for train bridge questions the
rule builds none for. Each was written from the question and its supporting facts alone, as an analyst
would type the thread, before and without any model's answers or the follow-up rewrite's rule: the
first question asks for the bridge page's entity ("Who founded Media Matters for America?"), `bridge`
is that page's supporting title as HotpotQA writes it, the follow-up asks the original question's
answer naming the bridge only by a pronoun that fits its page (he/she for a person as the page says,
it/they/there for a thing or place: "What 1996 book did he write?"). Questions whose answer is the
bridge itself, that name the bridge, or whose first hop has no single answer in the supporting facts
(one of several people or places) were left out. Loading refuses a row, naming its line, whose id is
not a train bridge question, whose question or answer is not train's unchanged, whose bridge is not a
supporting title or is named by the question, the first question or the follow-up, or whose follow-up
has no pronoun.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from backend.eval.datasets import json_lines
from benchmarks.followup_pairs_rule import ThreadPair, _base, _plain, _words

HAND_FIELDS = ("id", "question", "first_question", "bridge", "follow_up", "answer")
# The words a follow-up may name the bridge by.
_REFERRING = {"he", "she", "it", "they", "him", "her", "them", "his", "hers", "its", "their", "there",
              "this", "that", "these", "those"}


class HandPairError(ValueError):
    """A hand-written pair that is not a train bridge question split honestly."""


def _hand_pair(row, records: dict[str, dict], where: str) -> ThreadPair:
    """The thread pair a hand-written row gives, checked against its train question."""
    if not isinstance(row, dict):
        raise HandPairError(f"{where}: a pair is one JSON object with the keys {', '.join(HAND_FIELDS)}")
    missing = [key for key in HAND_FIELDS if key not in row]
    unknown = sorted(set(row) - set(HAND_FIELDS))
    if missing or unknown:
        raise HandPairError(f"{where}: missing {missing}, unknown {unknown}: a pair has exactly the keys "
                            f"{', '.join(HAND_FIELDS)}")
    empty = [key for key in HAND_FIELDS if not isinstance(row[key], str) or not row[key].strip()]
    if empty:
        raise HandPairError(f"{where}: {', '.join(empty)} must be non-empty text")
    record = records.get(row["id"])
    if record is None or record.get("type") != "bridge":
        raise HandPairError(f"{where}: {row['id']} is not a bridge question of the train file read "
                            f"(data/hotpotqa/train.jsonl): pairs are written for train's bridge questions only")
    for key in ("question", "answer"):
        if row[key] != record[key]:
            raise HandPairError(f"{where}: {key} is not train's for {row['id']}: copy it unchanged, "
                                f"{record[key]!r}")
    titles = list(dict.fromkeys(record["supporting_facts"]["title"]))
    if row["bridge"] not in titles:
        raise HandPairError(f"{where}: bridge {row['bridge']!r} is not a supporting title of {row['id']} "
                            f"({titles}): write the bridge page's title as HotpotQA writes it")
    name = _plain(_base(row["bridge"]))
    names = re.compile(rf"\b{re.escape(name)}\b")
    for key, what in (("question", "the bridge is the supporting page the question does not name"),
                      ("first_question", "the first question asks for it"),
                      ("follow_up", "the follow-up names it only by a pronoun (he, she, it, they, there...)")):
        if names.search(_plain(row[key])):
            raise HandPairError(f"{where}: {key} names the bridge {row['bridge']!r}: {what}")
    if set(_words(name)) <= set(_words(_plain(row["answer"]))):
        raise HandPairError(f"{where}: the answer is the bridge {row['bridge']!r} itself: no second hop is "
                            f"left to ask; leave the question out")
    if not set(_words(row["follow_up"])) & _REFERRING:
        raise HandPairError(f"{where}: the follow-up has no pronoun for the bridge: refer to it by one of "
                            f"{', '.join(sorted(_REFERRING))}")
    for key in ("first_question", "follow_up"):
        if not row[key].rstrip().endswith("?"):
            raise HandPairError(f"{where}: {key} is a question: end it with '?'")
    return ThreadPair(row["id"], " ".join(row["question"].split()), row["answer"],
                      " ".join(row["first_question"].split()), html.unescape(_base(row["bridge"])),
                      " ".join(row["follow_up"].split()), "hand")


def hand_pairs(path: Path, records: list[dict]) -> list[ThreadPair]:
    """The pairs written by hand in `path` (JSONL), each checked against its question in `records`;
    the first row that fails is refused with its line and what to change."""
    by_id = {record["id"]: record for record in records}
    pairs, seen = [], set()
    rows = json_lines(path, lambda number, error: HandPairError(
        f"{path}:{number}: not JSON ({error}): each line is one pair, a JSON object"))
    for number, row in rows:
        where = f"{path}:{number}"
        pair = _hand_pair(row, by_id, where)
        if pair.id in seen:
            raise HandPairError(f"{where}: {pair.id} is written twice: keep one pair per question")
        seen.add(pair.id)
        pairs.append(pair)
    return pairs
