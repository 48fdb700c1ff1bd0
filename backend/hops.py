"""Plans of sub-questions: a multi-hop question researched one hop at a time.

The Planner breaks the question into at most three simple questions, each asking one fact that one
search can find, later ones naming an earlier answer as #1 or #2 ("Who wrote Dracula?" → "In which
city was #1 born?"). Each hop is searched and read on its own, as a short span with the sentence
that states it, and its answer is filled into the hops after it. A 1.5B reader reads one hop well
and two hops at once badly; this is what the blueprint is for on `agent.plan_shape = "subquestions"`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from backend.prompts.planner import worked_examples_text
from backend.tools.text_ranking import tokenize

if TYPE_CHECKING:
    from backend.question import Question

MAX_HOPS = 3
_LINE = re.compile(r"^\s*(?:q(?:uestion)?\s*)?(\d)[.):]\s*(.+?)\s*$", re.IGNORECASE)
_REFERENCE = re.compile(r"#(\d)")


@dataclass
class Hop:
    """One sub-question: as the Planner wrote it, as asked (earlier answers filled in), and its answer
    with the retrieved sentence that states it ("Title: sentence"; "" when none does)."""

    number: int
    template: str
    question: str = ""
    answer: str = ""
    sentence: str = ""
    queries: list[str] = field(default_factory=list)
    _asked: Question | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def stated(self) -> bool:
        return bool(self.answer and self.sentence)

    @property
    def asked(self) -> Question:
        """The sub-question as asked (as written until earlier answers are filled in), parsed once per wording."""
        from backend.question import Question  # backend.question parses with this module's asked_kind

        text = self.question or self.template
        if self._asked is None or self._asked.text != text:
            self._asked = Question.parse(text)
        return self._asked

    def to_dict(self) -> dict:
        return {f.name: list(value) if isinstance(value := getattr(self, f.name), list) else value
                for f in fields(self) if f.init}


def parse_subquestions(text: str, max_hops: int = MAX_HOPS) -> list[str]:
    """The numbered questions of a decomposition, in order, each once. The plan stops at a numbered
    line that is not a question (a claim, often the guessed answer) or that refers to itself or a
    later line."""
    found: list[str] = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        sub = " ".join(match.group(2).split())
        references = [int(n) for n in _REFERENCE.findall(sub)]
        if not sub.endswith("?") or any(n < 1 or n > len(found) for n in references):
            break
        if sub and sub.lower() not in (f.lower() for f in found):
            found.append(sub)
        if len(found) >= max_hops:
            break
    return found


_ASKING = frozenset(tokenize(["who whom whose what which when where why how did does do was were has have had"])[0])


def _words(text: str) -> set[str]:
    """Stemmed content words, without the words that only make it a question."""
    return set(tokenize([_REFERENCE.sub(" ", text)])[0]) - _ASKING


_IDENTITY = re.compile(r"^(?i:who|what)\s+(?i:is|was|are|were)\s+([A-Z][\w'’.-]*(?:\s+[A-Z0-9][\w'’.-]*)*)\s*\?$")


def sensible(subquestions: list[str], question: Question) -> tuple[list[str], str | None]:
    """The sub-questions that belong to `question`, and a note on what was left out (None: nothing).
    A hop that neither refers to an earlier one nor shares a word with the question was copied from
    elsewhere (a small model repeats its examples) and goes; a hop that asks the whole question again
    makes the question one hop, and so do hops none of which names anything the question names (a
    decomposition that lost the question's subject: "When did the civil war end?" for a question
    about Kerensky and the Bolsheviks), and so do hops that leave out a name of two words or more
    ("Who is the UFC champion?" for a question about the one Renzo Gracie has a victory over: the hops
    answer another question; a one-word name, "Western" or "Argentine", is often a description).
    Hops after the last one that asks for what the question asks for (asks_alike: "What 1942 film
    did Wallis and Bogart make?" for "... collaborated to make what 1942 film?") answer something
    else ("Who were the two actors in this film?") and go. A hop that only asks who or what a name
    the question gives is ("Who is Paul DeBoy?": its answer is the name itself, which no sentence
    states as an answer, so the hop would be redone and then researched anyway) goes, its name
    written into the hops that refer to it. A comparison whose hops leave out one of its options ("Which university was founded as
    a vocational high school?" for "Between A and B, which ...?") is researched as one hop, where the
    reader chooses among the options."""
    text = question.text
    asked = _words(text)
    kept: list[str] = []
    renumbered: dict[str, str] = {}  # a kept hop's number as written -> as kept
    identities: dict[str, str] = {}  # a hop asking who a name is, by its number -> that name
    vacuous = 0
    for number, sub in enumerate(subquestions, 1):
        identity = _IDENTITY.match(sub)
        if identity and named_in(identity.group(1), text):
            identities[str(number)] = identity.group(1)
            continue
        sub = _REFERENCE.sub(lambda m: identities.get(m.group(1), m.group(0)), sub)
        references = _REFERENCE.findall(sub)
        if any(n not in renumbered for n in references) or not (references or _words(sub) & asked):
            continue  # about nothing the question names, or resting on a hop that went
        if asks_nothing_of(sub):
            renumbered[str(number)] = renumbered[references[-1]]
            vacuous += 1
            continue
        kept.append(_REFERENCE.sub(lambda m: f"#{renumbered[m.group(1)]}", sub))
        renumbered[str(number)] = str(len(kept))
    notes = ([f"left out {len(identities)} sub-question(s) asking only who or what a name the question gives is"]
             if identities else [])
    if vacuous:
        notes.append(f"left out {vacuous} sub-question(s) asking nothing of an earlier answer (\"What did #1 do?\")")
    if len(kept) + len(identities) + vacuous < len(subquestions):
        notes.append(f"left out {len(subquestions) - len(identities) - vacuous - len(kept)} sub-question(s) about "
                     "nothing the question names or resting on one that was left out")
    restated = next((sub for sub in kept if asked and len(_words(sub) & asked) >= 0.8 * len(asked)), None)
    if restated is not None and len(kept) + vacuous > 1:
        kept, notes = [text], notes + ["a sub-question asked the whole question: researching it as one hop"]
    names = [name for name in question.names if _words(name)]
    left_out = [name for name in names if not any(_words(name) & _words(sub) for sub in kept)]
    if kept and kept != [text] and names and left_out == names:
        kept, notes = [text], notes + [f"no sub-question names what the question names ({', '.join(names)}): "
                                           "researching it as one hop"]
    elif kept and kept != [text] and (lost := [name for name in left_out if len(name.split()) > 1]):
        kept, notes = [text], notes + [f"no sub-question names {', '.join(lost)}, which the question names: "
                                           "researching it as one hop"]
    options = question.choices
    if kept and kept != [text] and options and not all(any(named_in(o, sub) for sub in kept) for o in options):
        kept, notes = [text], notes + ["the sub-questions leave out an option the question compares: "
                                           "researching it as one hop"]
    answering = max((i for i, sub in enumerate(kept)
                     if asks_alike(question.asks_for if sub == text else asked_kind(sub), question.asks_for)), default=None)
    if answering is not None and answering < len(kept) - 1:
        notes.append(f"left out {len(kept) - answering - 1} sub-question(s) after hop {answering + 1}, "
                     "which asks what the question asks")
        kept = kept[:answering + 1]
    return kept, "; ".join(notes) or None


_SAYS_NOTHING = frozenset(tokenize(["name"])[0])
_ASKS_WHERE_WHEN_HOW_MANY = (("<time>",), ("<place>",), ("<count>",))


def asks_nothing_of(sub: str) -> bool:
    """Whether a sub-question refers to an earlier answer and asks nothing of it: "What did #1 do?",
    "Who is #1?", "What is the name of #1?". On 40 `train` questions Qwen-1.5B wrote such a hop for 3;
    where it stayed the last hop, its reading replaced the person the hop before had found with a
    title of theirs."""
    return bool(_REFERENCE.search(sub)) and _words(sub) <= _SAYS_NOTHING and asked_kind(sub) not in _ASKS_WHERE_WHEN_HOW_MANY


def fill(template: str, answers: list[str]) -> str:
    """The sub-question with each #n replaced by the n-th hop's answer (left as written when that hop
    has none)."""
    def answer_of(match: re.Match) -> str:
        n = int(match.group(1))
        return answers[n - 1] if 0 < n <= len(answers) and answers[n - 1] else match.group(0)

    return _REFERENCE.sub(answer_of, template)


def subjects_of(template: str, answers: list[str]) -> list[str]:
    """The earlier answers a sub-question asks about (its #n, answered)."""
    return [answers[n - 1] for n in map(int, _REFERENCE.findall(template)) if 0 < n <= len(answers) and answers[n - 1]]


def hops_from(subquestions: list[str], question: Question | None = None) -> list[Hop]:
    """The hops of a plan; one that is `question` itself keeps its parse."""
    hops = [Hop(number=i, template=sub) for i, sub in enumerate(subquestions, 1)]
    for hop in hops:
        if question is not None and hop.template == question.text:
            hop._asked = question
    return hops


def last_hop_answers(hops: list[Hop]) -> bool:
    """Whether the last hop's answer is the question's: a single hop, or a last hop built on an earlier
    one's answer (#n). Hops side by side ("Who is Damon Stoudamire's cousin?", "What team did the
    cousin play for?" written without #1) are facts the question's answer is read from: on 30 `train`
    decompositions by Qwen-1.5B, 8 of 17 bridge ones ended with such a hop, often a side fact."""
    return len(hops) < 2 or bool(_REFERENCE.search(hops[-1].template))


_WH = re.compile(r"\b(what|which|who|whom|when|where|how)\b", re.IGNORECASE)
_OPENING = re.compile(r"^\W*(?:(?:in|on|at|from|for|during|of|by|to|since|until)\s+)?(what|which|who|whom|when|where|how)\b",
                      re.IGNORECASE)
# Where the words naming what is asked end: a verb, a preposition, a relative word, punctuation.
_PHRASE_END = frozenset(
    "is was are were be been did does do has have had can could will would shall should may might "
    "of in on at for from by with to into about after before during since than that who whom whose which "
    "where when while as and or but through over under near across against between among within behind along "
    "around per via".split())
_TIME_WORDS = frozenset("year years decade century date month day".split())
_GENERIC = frozenset("name title kind type sort".split())
_ARTICLES = frozenset("the a an".split())
_TOKEN = re.compile(r"[\w'’#-]+|[^\w\s]")


def asked_kind(question: str) -> tuple[str, ...] | None:
    """What a question asks for: ("<time>",), ("<person>",), ("<place>",), ("<count>",), or the
    stemmed words of its "what/which X" phrase ("Which 1942 film did ..." -> ("1942", "film"), "What
    is the nationality of ..." -> ("nation",), "What is the name of the complex ..." -> ("complex",),
    "What is #1's nationality?" -> ("nation",)); None when the words do not say (a bare "what",
    "What did #1 do?", "How far ..."). The asking word is the question's first when it opens it ("In
    which year ..."), else its last ("Castle Hill is near what residence ...?"), so that a relative
    "who" inside a statement is not taken for it."""
    found = list(_WH.finditer(question))
    if not found:
        return None
    match = _OPENING.match(question) or found[-1]
    word = match.group(1).lower()
    kinds = {"when": "<time>", "who": "<person>", "whom": "<person>", "where": "<place>"}
    if word in kinds:
        return (kinds[word],)
    rest = _TOKEN.findall(question[match.end():])
    lowered = [token.lower() for token in rest]
    if word == "how":
        return ("<count>",) if lowered[:1] and lowered[0] in ("many", "much") else None
    if lowered[:1] and lowered[0] in ("is", "was", "are", "were", "of"):
        possessive = next((i for i, token in enumerate(lowered[:6]) if token.endswith(("'s", "’s"))), None)
        if possessive is not None:
            rest = rest[possessive + 1:]  # "What is #1's nationality?", "Which of X's cousins ..."
        elif lowered[0] != "of" and len(rest) > 1 and lowered[1] in _ARTICLES:
            rest = rest[2:]  # "What is the nationality of ..."
    while True:
        phrase: list[str] = []
        for token in rest:
            lower = token.lower()
            if (not re.match(r"\w", token) or lower in _PHRASE_END or token.startswith("#")
                    or (phrase and lower.endswith("ed"))):  # "What other teams played ...": a verb
                break
            phrase.append(lower)
        if not phrase:
            return None
        after = [token.lower() for token in rest[len(phrase):]]
        if phrase[-1] in _GENERIC and after[:1] == ["of"]:
            rest = rest[len(phrase) + (2 if after[1:2] and after[1] in _ARTICLES else 1):]
            continue  # "the name of the complex": the complex
        if phrase[-1] in _TIME_WORDS:
            return ("<time>",)
        stems = tuple(tokenize([" ".join(phrase)])[0])
        return stems or None


def asks_for_time(question: str) -> bool:
    """Whether a question asks when ("When ...?", "In which year ...?", "... born in what year?")."""
    return asked_kind(question) == ("<time>",)


def asks_alike(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> bool:
    """Whether two questions ask for the same kind of thing, given what each asks for (asked_kind): the
    same class, or phrases one of whose last words is in the other ("Which river flows through ..."
    and "Which river ...")."""
    return bool(a and b) and (a[-1] in b or b[-1] in a)


def named_in(answer: str, question: str) -> bool:
    """Whether every content word of `answer` is already in `question`: something the question names."""
    words = _words(answer)
    return bool(words) and words <= _words(question)


def restates_its_subject(answer: str, question: Question) -> bool:
    """Whether a sub-question's answer is what the sub-question itself names ("Damon Lamon Stoudamire"
    for "Who is Damon Stoudamire's cousin?", read on `train`): no answer to it. A question asking for
    a name ("What is X's full name?") or choosing among options may answer with what it names."""
    if question.closed or "name" in tokenize([question.text])[0]:
        return False
    said = set(tokenize([answer])[0])
    names = [set(tokenize([name])[0]) for phrase in question.names for name in re.split(r"\s+and\s+|,\s*", phrase)]
    return named_in(answer, question.text) or any(name and name <= said for name in names)


def answering_hop(hops: list[Hop], question: Question) -> Hop | None:
    """The hop whose answer is the question's, or None (read it for the question from every hop's
    results). That is the last hop when it builds on an earlier answer (last_hop_answers) and is not
    a side check: a hop whose answer the question names already ("Which team did #1 play for?" ->
    the team the question names) or that asks when the question does not ("When was #1 first
    played?" for "Which sport has been played at the BayArena since 1958?"). After a side check,
    the hop before it answers, if it is none either. On the first 10 `train` questions (hybrid
    search), 2 decompositions ended with such a check, and the run answered with the check's answer.
    A single hop answers only when it is the question itself: a narrower one ("Who was born on
    February 20, 1983?" for "Who, born February 20, 1983, played for The Monarchs ...?", what is
    left once side hops go) found the passages, and the question is read over them."""
    if not hops or not last_hop_answers(hops):
        return None
    if len(hops) == 1:  # the question itself answers; a narrower hop leaves out some of what it asks
        return hops[0] if hops[0].answer and hops[0].template.strip() == question.text.strip() else None
    for hop in reversed(hops):
        if not hop.answer:
            return None
        side_check = named_in(hop.answer, question.text) or (hop.asked.asks_when and not question.asks_when)
        if not side_check:
            return hop
    return None


# "Are Chrysalis and Look both women's magazines?": the pair before "both", what is asked of it after.
_PAIR_BOTH = re.compile(r"^\s*(?P<aux>is|are|was|were|do|does|did|has|have|had)\s+(?P<first>.+?)\s+and\s+(?P<second>.+?)"
                        r"\s+both\s+(?P<asked>.+?)[\s?]*$", re.IGNORECASE)
_SINGULAR = {"are": "is", "were": "was", "have": "has", "do": "does"}
_FUNCTION_WORDS = frozenset("of in on at by for from with to or and as than been be being".split())


def each_of_pair(question: Question) -> list[str]:
    """A yes/no question asked of two things at once, as one question about each ("Are Chrysalis and
    Look both women's magazines?" -> "Is Chrysalis a women's magazine?", "Is Look a women's
    magazine?"); [] when the question is not of that shape ("both" after the pair, each side a name):
    with "both" before the pair, where the second name ends is a guess ("Are both Deerhunter and Nine
    Lashes American Christian rock bands?"). On `train`, read whole with both pages in front of it,
    the reader answered "no" for two magazines each called a magazine; asked of each, "yes"."""
    match = _PAIR_BOTH.match(question.text)
    if not match or not question.asks_yes_or_no:
        return []
    names = [match.group("first").strip(), match.group("second").strip()]
    if not all(_named(name) for name in names) or re.search(r",|\bor\b", match.group("asked")):
        return []  # "..., or neither?" asks more than one thing of them
    aux = match.group("aux")
    singular = _SINGULAR.get(aux.lower(), aux.lower())
    asked = _one_of(match.group("asked").rstrip(" ?-–—.,"))
    return [f"{singular[:1].upper() + singular[1:]} {name} {asked}?" for name in names]


def _named(phrase: str) -> bool:
    """A name of at most eight words ("the Barton Mine", "Reader's Digest", "\"Poleconomy\"")."""
    words = re.sub(r"^(?:the|a|an)\s+", "", phrase, flags=re.IGNORECASE).split()
    return 0 < len(words) <= 8 and (words[0][:1].isupper() or words[0][:1] in "\"'“")


def _one_of(asked: str) -> str:
    """What is asked of two things, asked of one: a plural noun phrase ("tennis players") as one ("a
    tennis player"); anything else ("English", "been members of a girl group") as written."""
    words = asked.split()
    last = words[-1] if words else ""
    if (not last.islower() or not last.endswith("s") or last.endswith(("ss", "us", "is", "'s", "’s"))
            or any(word.lower() in _FUNCTION_WORDS for word in words)):
        return asked
    phrase = " ".join(words[:-1] + [last[:-3] + "y" if last.endswith("ies") else last[:-1]])
    return ("an " if phrase[:1].lower() in "aeiou" else "a ") + phrase


def answered_yes_or_no(hop: Hop) -> bool:
    """A hop asking yes or no of one thing, answered with one of them."""
    return hop.asked.asks_yes_or_no and hop.answer in ("yes", "no")


def yes_no_answer(hops: list[Hop], question: Question) -> str | None:
    """A yes/no question's answer from hops that each ask yes or no of one thing ("Were A and B both
    English?" as "Was A English?" and "Was B English?"): "yes" when every hop says yes. None when the
    question or a hop is not yes/no (the question is then read over every hop's results). Each hop is
    read with one thing's page in front of the reader; read whole, the question was answered "yes"
    for a Nicaraguan poet and an English writer both being English."""
    if len(hops) < 2 or not question.asks_yes_or_no or not all(answered_yes_or_no(h) for h in hops):
        return None
    return "yes" if all(hop.answer == "yes" for hop in hops) else "no"


def weakest(hops: list[Hop]) -> Hop | None:
    """The first hop whose answer no retrieved sentence states (what a replan redoes), or None. A hop
    answered yes or no is none: no sentence states "no", and redoing it reads the same pages again."""
    return next((hop for hop in hops if not hop.stated and not answered_yes_or_no(hop)), None)


def readable_decomposition(hops) -> bool:
    """Whether a stored decomposition is a plan of sub-questions as backend.episode stores one (a
    Hop.to_dict() per hop), not none or data of another shape (an imported file)."""
    return isinstance(hops, list) and bool(hops) and all(
        isinstance(hop, dict) and isinstance(hop.get("template"), str) and isinstance(hop.get("number"), int)
        for hop in hops)


def worked_examples(memories: list[dict], limit: int = 2) -> list[tuple[str, list[str], str]]:
    """Verified decompositions among retrieved memories (backend.manager.memory_to_dict): (question,
    sub-questions as written, how it went), for worked_examples_shown."""
    examples = []
    for memory in memories:
        hops = memory.get("decomposition")
        if not readable_decomposition(hops) or not memory.get("verified", True):
            continue
        if memory.get("correct"):
            outcome = "the answer was right"
        else:
            weak = next((hop for hop in hops if not hop.get("sentence")), None)
            outcome = (f"the answer was wrong; no retrieved sentence stated hop {weak['number']}'s answer" if weak
                       else "the answer was wrong although a sentence stated every hop's answer")
        if memory.get("plan_source") == "person":
            outcome += "; a person wrote this plan"
        examples.append((memory["question"], [hop["template"] for hop in hops], outcome))
    return examples[:limit]


def worked_examples_shown(successful: list[dict], failed: list[dict]) -> str:
    """The worked examples among retrieved memories as the Planner writing sub-questions is shown them
    (the app's episodes, test-time rollouts and training data alike)."""
    return worked_examples_text(worked_examples(successful + failed))
