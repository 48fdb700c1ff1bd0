"""What the reader is given and how it must answer: evidence chosen over the whole run, and closed
questions recognised so they are answered by constrained choice instead of free text.

A run's later searches must not push out what its first searches found: passages are ranked by
relevance to the question (BM25 over title and text), not by recency, and whole paragraphs are
given while they fit the model's budget.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from backend.answer_match import answer_contains, normalize_answer
from backend.tools.text_ranking import rank_texts, split_sentences, tokenize

if TYPE_CHECKING:
    from backend.question import Question

_AUXILIARIES = ("is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had",
                "will", "would", "should", "may", "might")
_TAIL_CHOICE = re.compile(r",\s*(?:the\s+)?([^,?]+?)\s+or\s+(?:the\s+)?([^,?]+?)\s*\?*\s*$", re.IGNORECASE)
# "Between A and B, which ...?", also opened with "In" and without the comma ("In between A and B which ...?").
_BETWEEN = re.compile(r"^(?:in\s+)?between\s+(?:the\s+)?(.+?)\s+and\s+(?:the\s+)?(.+?)\s*(?:,|\b(?=(?:which|who|whose|what)\b))",
                      re.IGNORECASE)
_NAME = r"[A-Z0-9][\w'’.&-]*(?:\s+(?:(?:of|for|the|and|de|von|van|in|on|la|le|du)\s+)*[A-Z0-9][\w'’.&-]*)*"
_HEAD_CHOICE = re.compile(rf"^(?i:is|are|was|were|did|does|do|which|who|what)\b.*?\b({_NAME})\s+or\s+(?:the\s+)?({_NAME})")


def _clean_option(text: str) -> str:
    return " ".join(text.strip(" \"'.").split())


def _without_descriptor(option: str, other: str) -> str:
    """An option opened by lowercase words before a name, when the other option is a name: the name
    ("two scientists Ernst Messerschmid" beside "Philippe Perrin" -> "Ernst Messerschmid")."""
    words = option.split()
    if not other[:1].isupper() or not words[0][:1].islower():
        return option
    named = next((i for i, word in enumerate(words) if word[:1].isupper()), None)
    return " ".join(words[named:]) if named is not None else option


def choice_options(question: str) -> list[str]:
    """The options a question names ("..., A or B?", "Between A and B, ...", "Is A or B older?"), or []."""
    q = " ".join(question.split())
    for pattern in (_TAIL_CHOICE, _BETWEEN, _HEAD_CHOICE):
        match = pattern.search(q)
        if match:
            options = [_clean_option(match.group(1)), _clean_option(match.group(2))]
            if all(options):
                options = [_without_descriptor(options[0], options[1]), _without_descriptor(options[1], options[0])]
            if all(options) and options[0].lower() != options[1].lower() and all(len(o) <= 80 for o in options):
                return options
    return []


def is_yes_no_question(question: str) -> bool:
    """A question that opens with an auxiliary verb ("Are both ...", "Did ...") and names no options."""
    first = question.strip().split(maxsplit=1)
    return bool(first) and first[0].lower() in _AUXILIARIES and not choice_options(question)


def closed_options(question: str) -> list[str]:
    """The answers a closed question allows: its named options, or yes/no; [] for an open question."""
    options = choice_options(question)
    if options:
        return options
    return ["yes", "no"] if is_yes_no_question(question) else []


def named_pair(names: Sequence[str]) -> list[str]:
    """The two things an open question asks about together, from its named phrases ("What industry
    did both William Todd Field and Zoltan Korda work in?", "Cranium and Twin Tin Bots are both
    what?"): each is researched on its own page. [] when no phrase names such a pair; a closed
    question has none (backend.question.Question.pair)."""
    for phrase in names:
        parts = [part.strip() for part in phrase.split(" and ")]
        if len(parts) == 2 and all(part[:1].isupper() for part in parts):
            return parts
    return []


def select_evidence(question: str, passages: list[dict], *, max_chars: int, max_passage_chars: int) -> str:
    """The run's passages most relevant to the question, best first, each up to `max_passage_chars`,
    as many as fit in `max_chars`; passages sharing no word with the question follow, newest first."""
    return "\n".join(line for _, line in evidence_lines(question, passages, max_chars=max_chars,
                                                         max_passage_chars=max_passage_chars))


def evidence_lines(question: str, passages: list[dict], *, max_chars: int, max_passage_chars: int) -> list[tuple[str, str]]:
    """`select_evidence` as (title, line) pairs: which passages a reader is shown, and how."""
    unique, seen = [], set()
    for p in passages:
        key = (p.get("title"), (p.get("text") or "")[:200])
        if key in seen:
            continue
        seen.add(key)
        unique.append(p)
    if not unique:
        return []
    ranked = [i for i, _ in rank_texts([f"{p.get('title', '')}. {p.get('text') or ''}" for p in unique], question)]
    rest = [i for i in reversed(range(len(unique))) if i not in set(ranked)]
    lines, used = [], 0
    for i in ranked + rest:
        p = unique[i]
        text = " ".join((p.get("text") or "").split())
        if len(text) > max_passage_chars:
            text = text[:max_passage_chars].rsplit(" ", 1)[0] + " …"
        line = f"{p.get('title', '')}: {text}"
        if lines and used + len(line) > max_chars:
            continue
        lines.append((p.get("title", ""), line[:max_chars]))
        used += len(line) + 1
    return lines


def is_grounded(answer: str, question: str, passages: list[dict]) -> bool:
    """An open question's draft answer that the retrieved text states (as whole words) and that is
    not merely a phrase of the question itself: an entity the question already names is the first
    hop of a bridge question, not its answer."""
    return bool(stating_sentence(answer, question, passages))


_LEADING_FRAME = re.compile(r"^(?:until|till|by|at|on|in|from|since|before|after|about|around)\s+", re.IGNORECASE)
_UNIT = re.compile(r"\s+(?:per|a|an|each)\s+([\w-]+)\W*$", re.IGNORECASE)


def without_question_frame(answer: str, question: str) -> str:
    """The span without the frame the question gives it: a leading preposition ("Until 9 May 2026"
    for "Until what date ...?") and a trailing rate the question names ("50 crowns per tonne" for "What
    tariff per tonne ...?"). A name the question repeats ("Fyre Festival") is kept: it says something."""
    span = _LEADING_FRAME.sub("", answer.strip(), count=1)
    unit = _UNIT.search(span)
    if unit and set(tokenize([unit.group(1)])[0]) <= set(tokenize([question])[0]):
        span = span[:unit.start()]
    return span.strip() or answer.strip()


def shares_a_question_word(answer: str, question: str) -> bool:
    """The answer repeats a content word of the question ("Fyre Festival" for "the music festival ..."):
    often the entity the question describes, the first hop of a bridge question, rather than its answer."""
    return bool(set(tokenize([answer])[0]) & set(tokenize([question])[0]))


def stating_sentence(answer: str, question: str, passages: list[dict], *, max_chars: int = 240) -> str:
    """'Title: sentence' for the first retrieved sentence that states `answer` (see is_grounded), or "".
    A qualifier after a comma or in brackets ("Gregg Popovich, 1996") need not be stated with it."""
    core = re.split(r",|\s\(", answer, maxsplit=1)[0]
    for candidate in dict.fromkeys([answer, core]):
        found = _sentence_stating(candidate, question, passages, max_chars)
        if found:
            return found
    return ""


def passages_naming(passages: list[dict], names: list[str]) -> list[dict]:
    """The passages that name one of `names`: more than half of its content words in their title or
    text ("Claudio López" for "Claudio Javier López"); every passage when `names` has no content word."""
    wanted = [words for name in names if (words := set(tokenize([name])[0]))]
    if not wanted:
        return list(passages)
    naming = []
    for p in passages:
        words = set(tokenize([f"{p.get('title', '')} {p.get('text') or ''}"])[0])
        if any(2 * len(name & words) > len(name) for name in wanted):
            naming.append(p)
    return naming


def _sentence_stating(answer: str, question: str, passages: list[dict], max_chars: int) -> str:
    normalised = normalize_answer(answer)
    if not normalised or answer_contains(question, answer) or len(normalised) > 120:
        return ""
    for p in passages:
        title, text = p.get("title", ""), " ".join((p.get("text") or "").split())
        for sentence in split_sentences(text):
            if answer_contains(sentence, answer):
                return f"{title}: {sentence}"[:max_chars]
        if answer_contains(title, answer):
            return f"{title}: {text}"[:max_chars]
    return ""


def _unique_passages(passages: list[dict]) -> list[dict]:
    unique, seen = [], set()
    for p in passages:
        key = (p.get("title"), p.get("url"))
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def _best_sentence(passage: dict, query: str, max_chars: int) -> str:
    sentences = split_sentences(" ".join((passage.get("text") or "").split())) or [passage.get("title", "")]
    ranked = rank_texts(sentences, query)
    return (sentences[ranked[0][0]] if ranked else sentences[0])[:max_chars]


_NOT_ABOUT = frozenset(tokenize(["which what who whom whose when where why how many much name"])[0])


def is_about(sentence: str, title: str, asked: Sequence[Question], answer: str) -> bool:
    """Whether a sentence stating `answer` says it about what one of the `asked` questions asks: beside
    the answer's own words, it (with its page's title) names something the question names (most of a
    name's words), or holds two of the question's content words (all of them, if it has fewer). A
    document's "27" beside a wiki lake 27 metres deep, or "318" in "Nevada State Route 318", shares
    only the number with the question."""
    own = set(tokenize([answer])[0])
    said = set(tokenize([f"{title} {sentence}"])[0]) - own
    for question in asked:
        wanted = set(tokenize([question.text])[0]) - own - _NOT_ABOUT
        if not wanted:
            return True
        names = [words for name in question.names if (words := set(tokenize([name])[0]) - own)]
        if any(2 * len(name & said) > len(name) for name in names) or len(said & wanted) >= min(2, len(wanted)):
            return True
    return False


def citations(answer: str, question: Question, passages: list[dict], *, limit: int = 3, max_chars: int = 240,
              hops: Sequence[tuple[Question, str, str]] = ()) -> list[dict]:
    """The retrieved passages the answer rests on, numbered from 1, each with the sentence that
    supports it: for an open question the passages with a sentence stating the answer about what the
    question (or a hop of its plan) asks (is_about), then the passages stating a hop's answer (`hops`:
    (question as asked, answer, "Title: sentence") of each stated hop); for a closed one the best
    passage about each option (or, for yes/no, about the question), since the answer is a
    comparison no single sentence states. [] when nothing retrieved supports the answer; the run's
    other passages are what it also read."""
    unique = _unique_passages(passages)
    cited: list[tuple[dict, str]] = []
    options, text = list(question.choices), question.text
    if options or question.yes_no:
        queries = [f"{o} {text}" for o in options] if options else [text]
        for query, option in zip(queries, options or [None]):
            pool = [p for p in unique if option is None or answer_contains(f"{p.get('title', '')} {p.get('text') or ''}", option)]
            ranked = rank_texts([f"{p.get('title', '')}. {p.get('text') or ''}" for p in pool], query)
            for i, _ in ranked[: 1 if options else 2]:
                if all(pool[i] is not c for c, _ in cited):
                    cited.append((pool[i], _best_sentence(pool[i], query, max_chars)))
    elif normalize_answer(answer):
        core = re.split(r",|\s\(", answer, maxsplit=1)[0]
        asked = [question, *(hop_question for hop_question, _, _ in hops)]
        for p in unique:
            found = _sentence_stating(answer, text, [p], max_chars) or _sentence_stating(core, text, [p], max_chars)
            sentence = found.split(": ", 1)[-1] if found.startswith(f"{p.get('title', '')}: ") else found
            if found and is_about(sentence, p.get("title", ""), asked, answer):
                cited.append((p, sentence))
        for hop_question, hop_answer, stated in hops:
            title, _, sentence = stated.partition(": ")
            p = next((p for p in unique if p.get("title") == title and sentence[:60] in " ".join((p.get("text") or "").split())), None)
            if p is not None and all(p is not c for c, _ in cited) and hop_answer != answer:
                cited.append((p, sentence[:max_chars]))
    return [
        {"n": n, "title": p.get("title", ""), "url": p.get("url"), "source": p.get("source"), "sentence": sentence}
        for n, (p, sentence) in enumerate(cited[:limit], 1)
    ]


_QUESTION_WORDS = {"which", "what", "who", "whom", "whose", "when", "where", "why", "how", "is", "are", "was",
                   "were", "did", "do", "does", "in", "the", "a", "an", "of", "for", "and", "on", "at", "to"}
_NAMED = re.compile(r"[A-Z][\w'’.-]*(?:\s+(?:(?:of|for|the|and|de|von|in|on)\s+)?[A-Z0-9][\w'’.-]*)*")


def named_phrases(question: str) -> list[str]:
    """Quoted titles and capitalised names in the question: the entities a search should look up (a
    name inside a quoted title is part of that title, not a name of its own)."""
    quoted = re.findall(r'"([^"]{2,80})"', question)
    outside = re.sub(r'"[^"]{2,80}"', '"', question)
    names = []
    for match in _NAMED.findall(outside):
        words = match.split()
        while words and words[0].lower() in _QUESTION_WORDS:
            words = words[1:]
        if words and " ".join(words) not in quoted:
            names.append(" ".join(words))
    return list(dict.fromkeys(quoted + names))
