"""Follow-ups against the full question: HotpotQA `train` bridge questions asked as a thread of two, the
first hop and then the second as a follow-up that names the first hop's answer only by a pronoun, and,
paired on the same questions, the full question typed at once.

The pairs come from `data/hotpotqa/train.jsonl` only (never `dev`, nor `train-extra`, which is for
training only and whose paragraphs the search corpus does not hold): 30 built by rule and 73 written by
hand (`build_pairs`, 103 in all, the first 100 in train's order by default; a question both give is
the rule's).

Most are built by rule from each question's supporting facts (`pair_of`): the bridge page is
the supporting page the question does not name (its answer is the first hop's), the other page is the
one it names. The bridge phrase is the question's noun phrase whose head word the bridge page's first
sentence uses ("the scientist who invented the Tribometer": "Pieter van Musschenbroek was a Dutch
scientist"). Then, by where the phrase stands:

  relative   "Renzo Gracie has a victory over the UFC champion who was one of the pioneers of what
             sports organization?" -> "Who is the UFC champion Renzo Gracie has a victory over?", then
             "He was one of the pioneers of what sports organization?"
  object     "What is the nationality of the scientist who invented the Tribometer?" -> "Who is the
             scientist who invented the Tribometer?", then "What is his nationality?"
  subject    "The creator of the Lisa Simpson character was born in what year?" -> "Who is the creator
             of the Lisa Simpson character?", then "He was born in what year?" (also after an auxiliary:
             "How many records did the singer who sang ... sell worldwide?": "... did she sell ...?")

Titles are matched as written either way ("Love &amp; Other Drugs", "Love and other drugs"); the head
word is one of the kind words of the bridge page's first sentence (from its "is"/"was" to the first
word that says more), its title's "(film)" tail, or a word for the same kind ("show" for "series").
No pair is built where the answer is the bridge page itself ("Eric Edward Whitacre": "Eric Whitacre"),
where the phrase holds a verb of its own outside a relative clause, or ends on a possessive.
The pronoun is "it" for a thing, "he" or "she" for a person (a page whose first sentence gives a birth
or a life's years, or a person's kind; "she" where its text says "she" more than "he").

The rest are written by hand in `benchmarks/followup_pairs_hand.jsonl` (`hand_pairs`), one a line:
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

The thread is asked as the app asks it: the first question, then the follow-up made standalone with
its thread (backend.follow_up) and its passages reused. Each arm runs in fresh namespaces (cold memory).
It prints judge accuracy both ways with the exact McNemar test, seconds and searches per question, how
often the first hop was right and how often the follow-up was answered without a new search. Rows are
written as they finish, so a stopped run goes on where it stopped.

    .venv/bin/python benchmarks/followup_pairs.py --pairs         # the pairs, by rule and by hand
    .venv/bin/python benchmarks/followup_pairs.py --limit 100     # the default model: hours on 2 cores
"""

from __future__ import annotations

import argparse
import html
import json
import re
import statistics
import sys
import time
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.eval.datasets import json_lines  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TRAIN_FILES = (REPO / "data" / "hotpotqa" / "train.jsonl",)
HAND_PAIRS = REPO / "benchmarks" / "followup_pairs_hand.jsonl"
HAND_FIELDS = ("id", "question", "first_question", "bridge", "follow_up", "answer")
# The words a follow-up may name the bridge by.
_REFERRING = {"he", "she", "it", "they", "him", "her", "them", "his", "hers", "its", "their", "there",
              "this", "that", "these", "those"}
DEFAULT_OUT = REPO / ".mia" / "followup-pairs"

_TOKEN = re.compile(r"[\w'’.&-]+|[^\w\s]")
_DETERMINERS = {"the", "a", "an", "this"}
_RELATIVE = {"who", "that", "which", "whose"}
_AUXILIARIES = {"was", "is", "were", "are", "has", "have", "had", "did", "does", "do"}
_PREPOSITIONS = {"of", "for", "by", "in", "from", "with", "at", "on", "to", "about", "after", "near", "over"}
_ASKING = {"what", "which", "who", "whom", "when", "where", "how"}
_FUNCTION = _RELATIVE | _AUXILIARIES | _PREPOSITIONS | _ASKING | _DETERMINERS | {"and", "or", "as", "whom"}
_QUOTES = {'"', "'", "”", "“", "’"}
# The words a question may call a page's kind by that its text calls by another ("the TNT show": "a
# television series").
_SAME_KIND = [{"film", "movie"}, {"series", "show", "sitcom"}, {"song", "single", "track"},
              {"band", "group"}, {"company", "firm", "business"}, {"singer", "vocalist", "musician", "rapper"},
              {"novel", "book"}, {"flight", "plane", "aircraft"}, {"footballer", "player"},
              {"actor", "actress", "star"}, {"town", "city", "village"}]
_KINDS = {word: kinds for kinds in _SAME_KIND for word in kinds}
_PERSON_KINDS = set("""actor actress singer songwriter musician rapper writer author novelist poet journalist
    politician footballer player coach manager director producer screenwriter comedian model businessman
    businesswoman entrepreneur painter artist architect scientist mathematician philosopher composer
    conductor drummer guitarist bassist pianist dancer clergyman priest bishop king queen prince princess
    lawyer judge soldier officer general admiral boxer wrestler cricketer athlete cyclist swimmer
    personality presenter host broadcaster historian economist engineer inventor physician""".split())


@dataclass
class ThreadPair:
    id: str
    question: str  # the full question
    answer: str
    first_question: str  # asks for the bridge page's entity
    first_answer: str  # the bridge page's title
    follow_up: str  # the rest of the question, the bridge named by a pronoun
    rule: str  # "relative" | "object" | "subject", or "hand" for a pair written by hand


def _base(title: str) -> str:
    return re.sub(r"\s*\(.*?\)\s*$", "", title).strip()


def _plain(text: str) -> str:
    """`text` as a question and a title may both write it: entities decoded, accents, dashes, quotes
    and "&" written plainly, lower case ("Love &amp; Other Drugs" as "love and other drugs")."""
    text = unicodedata.normalize("NFKD", html.unescape(text))
    text = "".join(c for c in text if not unicodedata.combining(c)).replace("&", " and ")
    text = re.sub(r"[\u2010-\u2015-]", " ", text)
    text = re.sub(r"[\"'\u2018\u2019\u201c\u201d.,]", "", text)
    return " ".join(text.lower().split())


def _words(text: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[\w'’-]+", text)]


def _is_word(token: str) -> bool:
    return re.fullmatch(r"[a-z][a-z'’-]*", token) is not None


def _tokens(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _is_person(sentences: list[str]) -> tuple[bool, str]:
    """Whether a page is about a person (its first sentence gives a birth or a life's years, or calls
    them by a person's kind), and the pronoun its text uses for them."""
    first = " ".join(sentences[:1])
    text = " " + " ".join(sentences).lower() + " "
    he = len(re.findall(r"\b(?:he|his|him)\b", text))
    she = len(re.findall(r"\b(?:she|her|hers)\b", text))
    person = (re.search(r"\((?:[^()]*;)?\s*(?:born\b|[^()]*\b\d{3,4}\s*[–-])", first) is not None
              or bool(set(_kind_words(first)) & _PERSON_KINDS))
    return person, "she" if she > he else "he"


def _kind_words(first_sentence: str) -> list[str]:
    """The words a page's first sentence calls its subject by: from its "is"/"was" to the first word
    that starts to say more ("The Wailing is a 2016 South Korean horror film about a policeman":
    2016, south, korean, horror, film)."""
    words = _words(first_sentence)
    start = next((i for i, w in enumerate(words) if w in {"is", "was", "are", "were"}), None)
    if start is None:
        return []
    kind = []
    for word in words[start + 1:start + 16]:
        if word in _PREPOSITIONS | _RELATIVE | {"based", "known", "located", "directed", "written", "created"}:
            break
        kind.append(word)
    return kind


_OBJECT = {"he": "him", "she": "her", "it": "it"}
_POSSESSIVE = {"he": "his", "she": "her", "it": "its"}


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def pair_of(record: dict) -> ThreadPair | None:
    """The thread pair the rule builds from one bridge question, or None where it builds none."""
    question = " ".join(record["question"].split())
    titles = list(dict.fromkeys(record["supporting_facts"]["title"]))
    if record.get("type") != "bridge" or len(titles) != 2 or not question.endswith("?"):
        return None
    lowered, answer = _plain(question), record["answer"]
    bridge = [t for t in titles if _plain(_base(t)) not in lowered and _plain(answer) not in _plain(_base(t))]
    named = [t for t in titles if t not in bridge]
    if len(bridge) != 1 or len(named) != 1:
        return None
    pages = dict(zip(record["context"]["title"], record["context"]["sentences"]))
    bridge_text = pages.get(bridge[0], [])
    category = set(_kind_words(" ".join(bridge_text[:1]))) | set(_words(bridge[0][len(_base(bridge[0])):]))
    category |= {word for kind in category & _KINDS.keys() for word in _KINDS[kind]}
    named_words = {w for w in _words(_base(named[0])) if w not in _FUNCTION}
    person, pronoun = _is_person(bridge_text)
    pronoun = pronoun if person else "it"
    who = "Who" if person else "What"
    tokens = _tokens(question)
    low = [t.lower() for t, _, _ in tokens]
    is_named = [t.strip("'’") in named_words or re.sub(r"['’]s$", "", t) in named_words for t in low]

    def head_of_bridge(d: int) -> bool:
        """The noun phrase at `d` is headed by a word the bridge page's first sentence uses (not a name's)."""
        return any(w in category or w.rstrip("s") in category for w in low[d + 1:d + 4]
                   if w.isalpha() and w not in _FUNCTION and w not in named_words and len(w) > 2)

    def relative(x: int) -> bool:
        """`who`/`which`/`that` at `x` opens a clause on the noun before it: part of the phrase."""
        return low[x] in _RELATIVE and x > 0 and _is_word(low[x - 1]) and low[x - 1] not in _FUNCTION

    built = None
    # relative: a statement about the named thing, ending "... <the head> who/that/whose/<participle> ... what ...?"
    if low[0] not in _ASKING | _AUXILIARIES | {"in", "on", "at", "during", "name", "for"}:
        for d in range(1, len(tokens)):
            if low[d] not in _DETERMINERS or not head_of_bridge(d) or not any(is_named[:d]):
                continue
            k = d + 1
            while (k < len(tokens) and low[k] not in _RELATIVE and low[k] not in _FUNCTION and _is_word(low[k])
                   and not (k > d + 1 and low[k].endswith("ed"))):
                k += 1
            if (k >= len(tokens) or k == d + 1 or not (low[k] in _RELATIVE or low[k].endswith("ed"))
                    or not any(w in _ASKING for w in low[k + 1:])):
                continue
            if low[k - 1] not in category and low[k - 1].rstrip("s") not in category:
                continue  # the phrase's last word names the bridge's kind, not only a word before it ("Spanish")
            head = question[tokens[d + 1][1]:tokens[k - 1][2]]
            clause = question[:tokens[d][1]].strip().rstrip(",")
            rest = question[tokens[k + 1][1]:] if low[k] in _RELATIVE else question[tokens[k][1]:]
            if low[k] == "whose":
                follow = f"{_cap(_POSSESSIVE[pronoun])} {rest}"
            elif low[k] in _RELATIVE:
                follow = f"{_cap(pronoun)} {rest}"
            else:  # a participle: "... the Fox series created by whom?"
                follow = f"{_cap(pronoun)} was {rest}"
            built = (f"{who} is the {head} {clause}?", follow, "relative")
            break
    if built is None:
        for d in range(len(tokens)):
            if low[d] not in _DETERMINERS or not head_of_bridge(d) or question[:tokens[d][1]].count('"') % 2:
                continue  # (a determiner inside a quoted title is the title's)
            last = max((e for e in range(d + 1, len(tokens)) if is_named[e]
                        and not any(low[x] in {",", "?"} | _ASKING and not relative(x) for x in range(d + 1, e))),
                       default=None)
            if last is None:
                continue
            while last + 1 < len(tokens) and tokens[last + 1][0] in _QUOTES:
                last += 1
            # the phrase's head after the name: "the Lisa Simpson character"
            nouns = 0
            while (nouns < 2 and last + 2 < len(tokens) and _is_word(low[last + 1]) and low[last + 1] not in _FUNCTION
                   and tokens[last + 1][0].islower() and not low[last + 1].endswith("ed")
                   and low[last + 2] in _AUXILIARIES):
                last, nouns = last + 1, nouns + 1
            if re.search(r"['’]s$", low[last]):
                continue  # a name's possessive goes on to what it owns ("Kim Dae-woo's directing debut")
            if any(low[x] in _AUXILIARIES and not any(relative(y) for y in range(d + 1, x))
                   for x in range(d + 1, last)):
                continue  # a verb of its own: a clause, not a noun phrase ("the majority was sung by ...")
            after = low[last + 1] if last + 1 < len(tokens) else "?"
            phrase = question[tokens[d][1]:tokens[last][2]]
            before, tail = question[:tokens[d][1]], question[tokens[last][2]:]
            if after == "?" and d > 0:
                of = re.search(r"\bthe ([\w'’ -]{1,40}?) of\s*$", before, re.IGNORECASE)
                if of:  # "the nationality of <the phrase>": "his nationality"
                    follow = before[:of.start()] + f"{_POSSESSIVE[pronoun]} {of.group(1)}" + tail
                else:
                    follow = before + _OBJECT[pronoun] + tail
                built = (f"{who} is {phrase}?", follow, "object")
            elif d == 0 and after in _AUXILIARIES:
                built = (f"{who} is {phrase[:1].lower() + phrase[1:]}?", _cap(pronoun) + tail, "subject")
            elif (d > 0 and low[0] in _ASKING and low[d - 1] in _AUXILIARIES and _is_word(after)
                  and after not in _FUNCTION and len(tokens) - last <= 4):
                # "How many records did <the singer who sang X> sell?": "did she sell"
                built = (f"{who} is {phrase}?", before + pronoun + tail, "subject")
            if built is not None:
                break
    if built is None:
        return None
    first, follow, rule = built
    bridge_words = set(_words(_plain(_base(bridge[0]))))
    if (_plain(answer) in _plain(first) or bridge_words <= set(_words(_plain(answer)))
            or not re.search(rf"\b(?:{pronoun}|{_OBJECT[pronoun]}|{_POSSESSIVE[pronoun]})\b",
                                                        follow, re.IGNORECASE)):
        return None
    return ThreadPair(record["id"], question, answer, " ".join(first.split()), _base(bridge[0]),
                      " ".join(follow.split()), rule)


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


def build_pairs(paths=TRAIN_FILES, limit: int = 100, hand: Path | None = HAND_PAIRS) -> list[ThreadPair]:
    """Up to `limit` thread pairs, in file order, from the bridge questions of `paths`: the rule's, and
    for the questions it builds none for, those written by hand in `hand` (None: the rule's only)."""
    records = [json.loads(line) for path in paths
               for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    ruled = {pair.id: pair for pair in map(pair_of, records) if pair is not None}
    written = {pair.id: pair for pair in hand_pairs(hand, records)} if hand is not None else {}
    pairs = [ruled.get(record["id"]) or written.get(record["id"]) for record in records]
    return [pair for pair in pairs if pair is not None][:limit]


def by_source(pairs) -> str:
    """How many pairs the rule built and how many were written by hand."""
    hand = sum(pair.rule == "hand" for pair in pairs)
    return f"{len(pairs) - hand} built by rule, {hand} written by hand"


def _searches(events) -> int:
    from backend.events import ToolCalled

    return sum(1 for event in events if isinstance(event, ToolCalled) and event.name.endswith("search"))


def _verdict(events) -> str:
    from backend.replay import replay

    run = replay(events)
    return run.verdict.label if run.verdict is not None else ("failed" if run.failure is not None else "none")


def ask_pair(agent, pair: ThreadPair, number: int) -> dict:
    """One pair both ways: as a thread (the first question, then the follow-up read with it) and as the
    full question, each in a fresh namespace."""
    from backend.agent import RunRequest
    from backend.follow_up import FollowUp
    from backend.replay import replay

    started = time.perf_counter()
    first = list(agent.run(RunRequest(pair.first_question, namespace=f"thread-{number}",
                                      ground_truth=pair.first_answer)))
    made = agent.read_follow_up(pair.follow_up, f"thread-{number}", first[0].run_id)
    follow = list(agent.run(RunRequest(made.question, namespace=f"thread-{number}", ground_truth=pair.answer,
                                       follow_up=FollowUp(first[0].run_id, pair.follow_up, made.how))))
    thread_seconds = time.perf_counter() - started
    started = time.perf_counter()
    full = list(agent.run(RunRequest(pair.question, namespace=f"full-{number}", ground_truth=pair.answer)))
    full_seconds = time.perf_counter() - started
    return {"id": pair.id, "rule": pair.rule, "first_answer": replay(first).answer,
            "first_right": _verdict(first) == "correct", "rewritten": made.question,
            "rewrite_named_the_bridge": pair.first_answer.lower() in made.question.lower(),
            "model_chose": made.model_called, "thread_answer": replay(follow).answer,
            "thread_right": _verdict(follow) == "correct", "thread_seconds": round(thread_seconds, 2),
            "thread_searches": _searches(first) + _searches(follow), "follow_up_searches": _searches(follow),
            "full_answer": replay(full).answer, "full_right": _verdict(full) == "correct",
            "full_seconds": round(full_seconds, 2), "full_searches": _searches(full)}


def run_pairs(agent, pairs: list[ThreadPair], rows_path: Path, progress: bool = True) -> list[dict]:
    """Each pair asked both ways, a row per pair in `rows_path` (JSONL); pairs already there are skipped."""
    rows_path.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if rows_path.exists():
        for line in rows_path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                done[row["id"]] = row
    for number, pair in enumerate(pairs, 1):
        if pair.id in done:
            continue
        row = ask_pair(agent, pair, number)
        with rows_path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        done[pair.id] = row
        if progress:
            print(f"[{number}/{len(pairs)}] {pair.id}: thread {row['thread_right']}, full {row['full_right']}",
                  file=sys.stderr, flush=True)
    return [done[pair.id] for pair in pairs if pair.id in done]


def table(rows: list[dict]) -> str:
    from backend.eval.significance import mcnemar_exact

    n = len(rows)
    if not n:
        return "No rows."
    only_thread = sum(r["thread_right"] and not r["full_right"] for r in rows)
    only_full = sum(r["full_right"] and not r["thread_right"] for r in rows)
    hand = sum(r["rule"] == "hand" for r in rows)
    lines = [f"{n} thread pairs (HotpotQA train bridge questions: {n - hand} built by rule, {hand} written by hand)",
             "",
             "| asked | judge accuracy | p50 s | mean s | searches/q |", "|---|---|---|---|---|"]
    for arm, label in (("thread", "as a thread: first hop, then the follow-up"), ("full", "the full question at once")):
        right = sum(r[f"{arm}_right"] for r in rows)
        seconds = [r[f"{arm}_seconds"] for r in rows]
        lines.append(f"| {label} | {right / n:.1%} ({right}/{n}) | {statistics.median(seconds):.1f} | "
                     f"{statistics.mean(seconds):.1f} | {statistics.mean(r[f'{arm}_searches'] for r in rows):.2f} |")
    lines += ["", f"Paired: right only as a thread {only_thread}, only at once {only_full}; exact McNemar "
                  f"p = {mcnemar_exact(only_thread, only_full):.3f}.",
              f"First hop right: {sum(r['first_right'] for r in rows)}/{n}; the rewrite named the bridge: "
              f"{sum(r['rewrite_named_the_bridge'] for r in rows)}/{n} (the model chose in "
              f"{sum(r['model_chose'] for r in rows)}); follow-ups answered without a new search: "
              f"{sum(r['follow_up_searches'] == 0 for r in rows)}/{n}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=100, help="thread pairs (default 100)")
    parser.add_argument("--pairs", action="store_true", help="print the pairs the rule builds and stop")
    parser.add_argument("--config", help="TOML configuration (default: mia.toml)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"rows and runs (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    pairs = build_pairs(limit=args.limit)
    if args.pairs:
        for pair in pairs:
            print(f"[{pair.rule}] {pair.question}\n  1. {pair.first_question} -> {pair.first_answer}\n"
                  f"  2. {pair.follow_up} -> {pair.answer}")
        print(f"{len(pairs)} pairs (of {args.limit} asked for): {by_source(pairs)}")
        return 0
    from backend.config import load_config
    from backend.eval.runner import open_eval_runtime

    runtime = open_eval_runtime(load_config(args.config), args.out)
    try:
        rows = run_pairs(runtime.agent, pairs, args.out / "rows.jsonl")
    finally:
        runtime.close()
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
