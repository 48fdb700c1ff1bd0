"""Follow-up pairs built by rule, for benchmarks/followup_pairs.py.

A pair (`ThreadPair`) is built from one bridge question's supporting facts (`pair_of`): the bridge
page is the supporting page the question does not name (its answer is the first hop's), the other
page is the one it names. The bridge phrase is the question's noun phrase whose head word the bridge page's first
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
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass

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

