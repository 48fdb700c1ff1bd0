"""The brief that opens a report: the question, the answer as a sentence naming what it is about
(and, for a number, its unit), how it was found hop by hop with a citation for each finding, what
stays unverified, and the thread's follow-ups.

Composed from templates over the runs' answers, hop answers and cited sentences, without a model
call: every finding is a retrieved sentence with its citation, and whatever no retrieved sentence
states is said under "what stays unverified" instead. It takes the runs of a thread (the first run,
then its follow-ups), so a single run is a thread of one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.report import cited_passage, retrieved_passages, source_label
from app.image_view import image_passage
from backend.answer_match import answer_contains
from backend.events import Event, HopAnswered, TextDelta
from backend.feedback_queue import FeedbackItem
from backend.question import Question
from backend.replay import RunRecord, replay

NUMBER = re.compile(r"^[-+]?[$€£]?\d[\d,.\s]*%?$")
YEAR = re.compile(r"^(1[0-9]|20)\d\d$")
# Words after a number that end its unit: "1987 after a decade", "17 crowns per tonne in 2025".
NOT_UNIT = {"after", "and", "as", "at", "before", "but", "by", "during", "for", "from", "in", "into", "is", "of",
            "on", "or", "since", "than", "that", "the", "to", "was", "were", "when", "which", "while", "with",
            "a", "an", "it", "its", "has", "had", "have", "be", "been", "are"}
MAX_UNIT_WORDS = 3


@dataclass
class BriefSource:
    """A source the brief cites: [n], what it is, the cited sentence and the passage as retrieved."""

    n: int
    title: str
    where: str
    sentence: str
    url: str | None = None
    text: str = ""  # the passage as retrieved ("" when the run's events do not hold it)


@dataclass
class Finding:
    """One thing the research found: a sentence of the brief and the sources [n] that state it."""

    text: str
    cites: list[int]


@dataclass
class FollowUp:
    question: str
    answer: str
    cites: list[int]


@dataclass
class Brief:
    question: str
    answer: str  # the answer as a sentence, without its full stop (its citations go before it)
    answer_cites: list[int]
    findings: list[Finding] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    follow_ups: list[FollowUp] = field(default_factory=list)
    sources: list[BriefSource] = field(default_factory=list)
    correction: str = ""  # a person's correction, said as theirs


class _Numbering:
    """Sources numbered across the thread: the first answer's citations keep their numbers; a hop's or
    a follow-up's sentence from another passage gets the next one."""

    def __init__(self) -> None:
        self.sources: list[BriefSource] = []
        self._seen: dict[tuple, int] = {}

    def number(self, citation: dict, passages: list[dict]) -> int:
        sentence = " ".join(str(citation.get("sentence") or "").split())
        key = (citation.get("title"), citation.get("url"), sentence)
        if key in self._seen:
            return self._seen[key]
        passage = cited_passage(citation, passages)
        n = len(self.sources) + 1
        self.sources.append(BriefSource(n=n, title=str(citation.get("title") or "(untitled)"), where=source_label(
            {**(passage or {}), **{k: v for k, v in citation.items() if v}}), sentence=sentence,
            url=citation.get("url") or (passage or {}).get("url"), text=str((passage or {}).get("text") or "")))
        self._seen[key] = n
        return n


def unit_of(answer: str, sentences: Sequence[str]) -> str:
    """The unit a number answer stands with in the sentence stating it ("17" in "17 crowns per tonne"
    -> "crowns per tonne"); '' for an answer that is not a number, a year, or no unit found."""
    answer = answer.strip()
    if not NUMBER.match(answer) or YEAR.match(answer):
        return ""
    for sentence in sentences:
        match = re.search(rf"(?<![\w.]){re.escape(answer)}(?![\w])\s+([^.,;:!?()\[\]\"“”]+)", sentence)
        if not match:
            continue
        words = []
        for word in match.group(1).split()[:MAX_UNIT_WORDS]:
            if word.casefold() in NOT_UNIT or not word.isalpha():
                break
            words.append(word.lower() if word.isupper() else word)
        if words:
            return " ".join(words)
    return ""


def about(question: Question, answer: str) -> str:
    """What the question is about, in words: its named things (the answer left out), else ''."""
    named = list(question.choices) or [p for p in question.names if not answer_contains(p, answer)]
    named = [n for n in dict.fromkeys(named) if n]
    if not named:
        return ""
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def answer_sentence(question: str, answer: str, cited: Sequence[str]) -> str:
    """The answer as a sentence that names what it is about and, for a number, its unit (without its
    full stop: the citations go before it)."""
    unit = unit_of(answer, cited)
    value = f"{answer} {unit}" if unit else answer
    asked = Question.parse(question)  # the run's question as its record holds it
    subject = about(asked, answer)
    if asked.choices:
        return f"Of {subject}, the answer is {value}"
    return f"The answer about {subject} is {value}" if subject else f"The answer is {value}"


def _hops(record: RunRecord) -> list[HopAnswered]:
    """Each hop as last researched (a replan redoes a hop; the redo counts)."""
    latest: dict[int, HopAnswered] = {}
    for hop in record.hops:
        latest[hop.number] = hop
    return [latest[n] for n in sorted(latest)]


def _passages(events: Sequence[Event], record: RunRecord) -> list[dict]:
    passages = retrieved_passages(events)
    ocr = image_passage(record.started)
    return passages + [ocr] if ocr is not None else passages


def compose_brief(runs: Sequence[Sequence[Event]], *, feedback: FeedbackItem | None = None) -> Brief:
    """The brief of a thread: `runs[0]` is the question, the rest its follow-ups (each a run's events).
    `feedback`: a person's verdict and right answer on the first run."""
    numbering = _Numbering()
    first_events = [e for e in runs[0] if not isinstance(e, TextDelta)]
    record = replay(first_events)
    passages = _passages(first_events, record)
    answer_event = record.last_answer_event
    answer = (answer_event.text if answer_event is not None else "") or ""
    citations = list(answer_event.sources) if answer_event is not None else []
    answer_cites = [numbering.number(c, passages) for c in citations]
    hops = _hops(record)
    stated_by_hop = next((h for h in reversed(hops) if h.sentence and h.answer and answer_contains(h.answer, answer)),
                         None) if answer and not citations else None
    if stated_by_hop is not None:  # the hop's sentence states the answer the run gave: it is the citation
        title, _, sentence = stated_by_hop.sentence.partition(": ")
        citations = [{"title": title, "sentence": sentence}]
    brief = Brief(question=record.question, answer="", answer_cites=answer_cites)
    if answer:
        brief.answer = answer_sentence(record.question, answer, [str(c.get("sentence") or "") for c in citations])
    unverified = brief.unverified

    for hop in hops:
        title, _, sentence = hop.sentence.partition(": ")
        if hop.answer and sentence:
            n = numbering.number({"title": title, "sentence": sentence}, passages)
            brief.findings.append(Finding(f"Hop {hop.number}: {hop.question} → {hop.answer}. "
                                          f"{title} states: “{sentence}”", [n]))
        else:
            unverified.append(f"Hop {hop.number}, “{hop.question}”, was answered {hop.answer or '(nothing)'}: "
                              "no retrieved sentence states it.")
    if stated_by_hop is not None:
        brief.answer_cites = [numbering.number(citations[0], passages)]  # numbered with its hop above
    if not hops:
        for citation, n in zip(citations, answer_cites):
            brief.findings.append(Finding(f"{citation.get('title') or '(untitled)'} states: "
                                          f"“{' '.join(str(citation.get('sentence') or '').split())}”", [n]))

    if record.failure is not None:
        unverified.append(f"The run failed: {record.failure.message}")
    elif answer_event is None:
        unverified.append("The run ended before any answer.")
    elif answer and not citations:
        unverified.append(f"No retrieved sentence states the answer “{answer}”: it rests on the model's reading alone.")
    if answer_event is not None and answer_event.forced:
        unverified.append(f"The answer was forced ({answer_event.reason}): the research did not finish.")
    if answer_event is not None and answer_event.taught and not answer_event.taught.get("confirmed"):
        unverified.append("The answer is a person's word: no retrieved source states it yet.")
    verdict = record.verdict
    if verdict is not None and not verdict.verified and not (feedback and (feedback.right_answer or feedback.thumbs)):
        unverified.append(f"Nothing verified the answer: the Judge's opinion without a right answer is "
                          f"“{verdict.label}”; a thumbs or the right answer would verify it.")
    elif verdict is None and answer_event is not None and record.failure is None:
        unverified.append("The answer was not judged (the run was stopped, or ended before its verdict).")
    if feedback is not None and feedback.right_answer:
        brief.correction = (f"A person corrected the answer: the right answer is {feedback.right_answer} "
                            f"(typed by {feedback.user}).")

    for events in runs[1:]:
        kept = [e for e in events if not isinstance(e, TextDelta)]
        follow = replay(kept)
        follow_answer = follow.last_answer_event
        text = (follow_answer.text if follow_answer is not None else "") or ""
        follow_passages = _passages(kept, follow)
        cites = [numbering.number(c, follow_passages) for c in (follow_answer.sources if follow_answer else [])]
        brief.follow_ups.append(FollowUp(follow.question, text or "(no answer)", cites))
        if text and not cites:
            unverified.append(f"Follow-up “{follow.question}”: no retrieved sentence states its answer “{text}”.")
    brief.sources = numbering.sources
    return brief


# -- as Markdown -------------------------------------------------------------------------------------
def cite_links(numbers: Sequence[int]) -> str:
    """' [[1]](#source-1) [[2]](#source-2)': each number a link to its source's section."""
    return "".join(f" [[{n}]](#source-{n})" for n in numbers)


def marked_passage(text: str, sentence: str) -> tuple[str, str, str]:
    """The passage as one paragraph, cut around the cited sentence: (before, the sentence, after); the
    sentence is '' when the passage does not hold it word for word."""
    from backend.tools.sentence_span import sentence_span

    flat = " ".join((text or "").split())
    span = sentence_span(flat, sentence) if sentence else None
    if span is None:
        return flat, "", ""
    return flat[:span[0]], flat[span[0]:span[1]], flat[span[1]:]


def brief_markdown(brief: Brief) -> list[str]:
    """The brief as the report's first section (escaped: what came from a model, a page or a document is data)."""
    from app.escaping import escape_markdown_file as md

    lines = ["## Brief", "", f"**The question.** {md(brief.question) or '(no question)'}", ""]
    if brief.answer:
        lines += [f"**The answer.** {md(brief.answer)}{cite_links(brief.answer_cites)}.", ""]
    else:
        lines += ["**The answer.** None was given.", ""]
    if brief.correction:
        lines += [f"**A person's correction.** {md(brief.correction)}", ""]
    if brief.findings:
        lines += ["**How it was found.**", ""]
        lines += [f"{i}. {md(f.text)}{cite_links(f.cites)}" for i, f in enumerate(brief.findings, 1)]
        lines.append("")
    lines += ["**What stays unverified.**", ""]
    lines += [f"- {md(item)}" for item in brief.unverified] or ["- Nothing: the answer is verified and each finding cited."]
    lines.append("")
    if brief.follow_ups:
        lines += ["**Follow-ups.**", ""]
        lines += [f"- {md(f.question)} → {md(f.answer)}{cite_links(f.cites)}" for f in brief.follow_ups]
        lines.append("")
    if brief.sources:
        lines += ["### Cited sources", ""]
        for source in brief.sources:
            lines += [f'<a id="source-{source.n}"></a>**[{source.n}] {md(source.title)}** ({md(source.where)})', ""]
            if source.sentence:
                lines += [f"Cited: “{md(source.sentence)}”", ""]
            if source.text:
                before, sentence, after = marked_passage(source.text, source.sentence)
                shown = f"{md(before)}**{md(sentence)}**{md(after)}" if sentence else md(before)
                lines += [f"> {shown}", ""]
    return lines
