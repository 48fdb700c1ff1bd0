"""Follow-up questions: a question asked under an answer, read with its thread.

A thread is a chain of runs, each following the one before (RunStarted.follow_up names the run it
follows and the thread's first run). A follow-up is made standalone before it is researched
(`rewrite`): the words that point back ("she", "it", "his", "this film") are replaced by what they
stand for, the previous answer or what the previous question asked about, by rules on what that
question asked for (backend.hops.asked_kind); one constrained model call chooses only where the rules
leave several candidates. The rewrite is shown and the person may change it. The thread's earlier
passages are put in the Executor's session (`reusable_passages`), so its reader can answer from them;
the episode searches again only when they do not state the answer (backend.episode).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from backend.events import ToolReturned
from backend.inputs import InputError
from backend.llm.base import ChatModel
from backend.prompts.planner import REFERENT_PREFILL, referent_messages
from backend.question import Question
from backend.reader import choose_option
from backend.replay import replay
from backend.tools.text_ranking import rank_texts, tokenize

MAX_THREAD_RUNS = 20  # the runs read back along a thread
REUSED_PASSAGES = 6  # the thread's passages most relevant to the follow-up that its session holds

_PERSONAL = {"he", "she", "him", "her", "his", "hers"}
_GROUP = {"they", "them", "their", "theirs"}
_THING = {"it", "its"}
_POSSESSIVE = {"his", "its", "their"}
_POINTERS = re.compile(r"\b(he|she|him|her|his|hers|they|them|their|theirs|it|its|there)\b"
                       r"|\b(this|that|these|those)\s+([A-Za-z][\w-]*)", re.IGNORECASE)
# After "her", a word that makes it an object ("gave her the prize", "married her in 1990"), not a possessive.
_NOT_OWNED = frozenset("the a an to for in on at by with and or from of as than that this these those who "
                       "when where which after before during since until into about".split())
_NOT_A_THING = frozenset("is was are were be been has have had did does do will would can could may might "
                         "he she it they him her them his its their who which what that this".split())
# "that <noun>" is "that" pointing back only before such a noun (otherwise it is a relative "that").
_CATEGORY_NOUNS = frozenset(
    "film movie book novel song album band group team company city town country place person man woman actor "
    "actress director author writer player singer show series game event war battle building school university "
    "organization party station river island ship plane magazine newspaper festival award prize channel character "
    "club league state region county village mountain lake album artist musician politician".split())
_PERSON_KIND, _TIME_KIND, _COUNT_KIND, _PLACE_KIND = ("<person>",), ("<time>",), ("<count>",), ("<place>",)


@dataclass
class ThreadTurn:
    """One earlier run of a thread: the question as researched (standalone), as the person typed it,
    its answer and the passages its research retrieved."""

    run_id: str
    question: str
    asked: str
    answer: str
    passages: list[dict] = field(default_factory=list)


@dataclass
class Thread:
    id: str  # the run id of the thread's first question
    turns: list[ThreadTurn]  # oldest first; the last is the run a follow-up follows

    @property
    def last(self) -> ThreadTurn:
        return self.turns[-1]


@dataclass(frozen=True)
class FollowUp:
    """A run request's follow-up: the run it follows, the question as the person typed it, and how it was
    read with the thread (Rewrite.how; the person's own wording says so)."""

    of_run: str
    asked: str
    how: str = ""


@dataclass
class FollowUpContext:
    """What a follow-up's episode is given: its thread and the earlier passages its session holds."""

    thread: str
    follows: str
    asked: str
    how: str
    passages: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        """As RunStarted.follow_up records it (the passages by title: the run log holds them already)."""
        return {"thread": self.thread, "follows": self.follows, "asked": self.asked, "how": self.how,
                "reused": [p.get("title", "") for p in self.passages]}


@dataclass
class Rewrite:
    question: str  # the follow-up made standalone (the question as typed when nothing points back)
    how: str  # a sentence saying what was replaced by what, and why
    replaced: list[tuple[str, str]] = field(default_factory=list)  # (word as typed, what it stands for)
    model_called: bool = False


def thread_of(events_of, run_id: str) -> Thread:
    """The thread a run belongs to, read back along the runs each follows; `events_of(run_id)` gives a
    logged run's events (KeyError when there is none). InputError when the run cannot be followed up."""
    turns: list[ThreadTurn] = []
    thread_id, current, seen = "", run_id, set()
    while current and current not in seen and len(turns) < MAX_THREAD_RUNS:
        seen.add(current)
        try:
            events = events_of(current)
            record = replay(events)
        except (KeyError, ValueError):
            if not turns:
                raise InputError(f"No run {current} in your history to follow up: pick a run from your past runs.") from None
            break  # an earlier run of the thread was deleted: the thread starts after it
        if record.started is None:
            break
        if not turns and not record.answer.strip():
            raise InputError(f"Run {current} gave no answer to follow up: ask its question again, or ask a new one.")
        follow_up = record.started.follow_up or {}
        thread_id = str(follow_up.get("thread") or current)
        passages = [p for event in events if isinstance(event, ToolReturned) for p in event.passages]
        turns.append(ThreadTurn(current, record.question, str(follow_up.get("asked") or record.question),
                                record.answer, passages))
        current = follow_up.get("follows")
    turns.reverse()
    return Thread(id=thread_id or run_id, turns=turns)


def reusable_passages(thread: Thread, question: str, limit: int = REUSED_PASSAGES) -> list[dict]:
    """The thread's passages a follow-up's session holds: each once, those most relevant to the
    (rewritten) question first, then the passages the last answer was read from."""
    unique: list[dict] = []
    seen = set()
    for turn in reversed(thread.turns):
        for passage in turn.passages:
            key = (passage.get("title"), (passage.get("text") or "")[:200])
            if key not in seen and passage.get("text"):
                seen.add(key)
                unique.append(passage)
    ranked = [i for i, _ in rank_texts([f"{p.get('title', '')}. {p.get('text')}" for p in unique], question)]
    order = ranked + [i for i in range(len(unique)) if i not in set(ranked)]
    return [dict(unique[i]) for i in order[:limit]]


def _stems(text: str) -> set[str]:
    return set(tokenize([text])[0])


@dataclass
class _Pointer:
    start: int
    end: int
    word: str  # as typed ("she", "this film")
    group: str  # "personal" | "group" | "thing" | "there" | "this"
    possessive: bool
    noun: str = ""  # "film" in "this film"


def _pointers(asked: str) -> list[_Pointer]:
    found = []
    for match in _POINTERS.finditer(asked):
        if match.group(1):
            if match.group(1)[0].isupper() and asked[:match.start()].strip():
                continue  # a capitalised word inside the question belongs to a name or a title ("It Must Have Been Love")
            word = match.group(1).lower()
            after = asked[match.end():].lstrip()
            next_word = re.match(r"[A-Za-z]+", after)
            possessive = word in _POSSESSIVE or (
                word == "her" and next_word is not None and next_word.group().lower() not in _NOT_OWNED)
            group = ("personal" if word in _PERSONAL else "group" if word in _GROUP else
                     "thing" if word in _THING else "there")
            found.append(_Pointer(match.start(), match.end(), match.group(1), group, possessive))
            continue
        pointer, noun = match.group(2).lower(), match.group(3)
        if noun.lower() in _NOT_A_THING or (pointer in ("that", "those") and noun.lower() not in _CATEGORY_NOUNS):
            continue
        owned = asked[match.end():match.end() + 2] in ("'s", "’s")
        end = match.end() + (2 if owned else 0)
        found.append(_Pointer(match.start(), end, match.group(0), "this", owned, noun.lower()))
    return found


def _subjects(previous: Question, answer: str) -> list[str]:
    """What the previous question asked about: the names it gives, other than its answer."""
    stems = _stems(answer)
    return [name for name in previous.names if not (_stems(name) and _stems(name) <= stems)]


def _candidates(pointer: _Pointer, kind: tuple[str, ...] | None, answer: str, subjects: list[str]) -> list[str]:
    """What a pointing word may stand for, the likelier first: one candidate is decided by rule."""
    by_answer = [answer] if answer else []
    about = subjects[:1] if len(subjects) == 1 else subjects
    if pointer.group == "there":
        return by_answer if kind == _PLACE_KIND else []
    if pointer.group == "personal":
        return by_answer if kind == _PERSON_KIND else (about or by_answer)
    if pointer.group == "group":
        return by_answer if kind not in (_TIME_KIND, _COUNT_KIND, _PLACE_KIND, None) else (about or by_answer)
    if pointer.group == "this" and kind not in (_PERSON_KIND, _TIME_KIND, _COUNT_KIND, _PLACE_KIND, None) \
            and _stems(pointer.noun) & set(kind):
        return by_answer  # "this film" after "Which film ...?"
    if kind in (_PERSON_KIND, _TIME_KIND, _COUNT_KIND):
        return about or ([] if kind == _PERSON_KIND else by_answer)  # "it" after "Who directed Jaws?": Jaws
    if kind is None:
        return by_answer + [name for name in about if name != answer]
    return by_answer or about  # a place or a thing asked for: "it" is the answer


_PLACE_PREPOSITIONS = frozenset("in from to near at of into".split())


def _written(referent: str, pointer: _Pointer, before: str) -> str:
    if pointer.group == "there":  # "What is the population there?": in Honolulu, unless a preposition says how
        said_before = re.findall(r"[A-Za-z]+", before)
        return referent if said_before and said_before[-1].lower() in _PLACE_PREPOSITIONS else f"in {referent}"
    if not pointer.possessive:
        return referent
    return referent + ("'" if referent.endswith("s") else "'s")


def rewrite(asked: str, thread: Thread, model: ChatModel | None = None) -> Rewrite:
    """The follow-up `asked` as a standalone question, read with the thread's last question and answer.
    Each word pointing back is replaced by rule; where the rule leaves several candidates (the previous
    question asked for nothing it names a kind of, or named several things), `model` chooses among them
    by log-probability, once, and that choice serves every such word (without a model, the likelier)."""
    asked = " ".join(asked.split())
    turn = thread.last
    previous = Question.parse(turn.question)  # the thread's question as its run researched it
    answer = "" if previous.closed else turn.answer.strip()
    kind = previous.asks_for
    subjects = _subjects(previous, turn.answer)
    choices: dict[str, list[str]] = {}
    for pointer in _pointers(asked):
        candidates = _candidates(pointer, kind, answer, subjects)
        if candidates:
            choices[pointer.word.lower()] = candidates
    if not choices:
        return Rewrite(asked, "No word in it points back to the thread: researched as typed.")
    chosen, model_called = None, False
    ambiguous = next((word for word, candidates in choices.items() if len(candidates) > 1), None)
    if ambiguous is not None and model is not None:
        options = choices[ambiguous]
        messages = referent_messages(turn.question, turn.answer, asked, ambiguous, options)
        chosen, model_called = choose_option(model, messages, options, REFERENT_PREFILL).label, True
    parts, replaced, last = [], [], 0
    for pointer in _pointers(asked):
        candidates = choices.get(pointer.word.lower())
        if not candidates:
            continue
        referent = chosen if chosen in candidates and len(candidates) > 1 else candidates[0]
        parts += [asked[last:pointer.start], _written(referent, pointer, asked[:pointer.start])]
        replaced.append((pointer.word, referent))
        last = pointer.end
    question = "".join(parts) + asked[last:]
    return Rewrite(question, _how(replaced, turn, answer, model_called, ambiguous is not None), replaced, model_called)


def _how(replaced: list[tuple[str, str]], turn: ThreadTurn, answer: str, model_called: bool, ambiguous: bool) -> str:
    said = []
    for word, referent in dict.fromkeys(replaced):
        why = (f"the answer to “{turn.question}”" if referent == answer else f"what “{turn.question}” asked about")
        said.append(f"“{word}” as {referent} ({why})")
    how = "Read with the thread: " + "; ".join(said) + "."
    if model_called:
        how += " The model chose among the candidates."
    elif ambiguous:
        how += " Several things could be meant: the likelier was taken."
    return how
