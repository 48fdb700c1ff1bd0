"""The reader: an Executor session's answer, read from the run's evidence as a short span.

`AnswerReading` is the reading half of `backend.executor.ExecutorSession`: it reads what the session
holds (the model, its conversation, the passages its tools returned, the results of tools that gather
no evidence) and sets `read_from`, the passages the answer was read from. A closed question is answered
by a constrained choice among its options (a comparison of dates or amounts decided from each option's
copied fact, backend.fact_comparison); an open one by a short generated span, after the sentence that
states it where the model quotes first.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

from backend import protocol
from backend.answer_match import normalize_answer
from backend.protocol import clean_query
from backend.events import Event, ExecutorThought, Recovery, TextDelta
from backend.evidence import evidence_lines
from backend.fact_comparison import comparison_of, decide
from backend.hops import restates_its_subject
from backend.llm.base import ChatModel, Choice, Completion
from backend.prompts import executor as prompts

if TYPE_CHECKING:
    from backend.question import Question


def choose_option(model: ChatModel, messages: list[dict], options: list[str], prefill: str) -> Choice:
    """The option the model scores highest after `prefill` ("Answer:"), each scored as the model would
    write it there, after a space. Scored after "Answer: " instead, an option began after a lone space
    token, a split the model never writes: every option scored near e^-7, and "yes" won whatever the
    evidence said (all 16 yes/no `train` questions were answered "yes"; docs/results.md, "Closed
    questions")."""
    spaced = model.choose(messages, [f" {option}" for option in options], prefill=prefill)
    return Choice(label=spaced.label[1:], logprobs={option[1:]: score for option, score in spaced.logprobs.items()},
                  method=spaced.method)


def choose_among_answers(model: ChatModel, question: str, candidates: list[str], passages: list[dict]) -> Choice:
    """The candidate answer (several runs' answers to one question) the model scores highest as the
    reply, read from the runs' pooled passages: those most relevant to the question and the candidates
    together, so the passage that states each candidate tends to be in view."""
    query = " ".join([question, *candidates])
    if model.traits.small:
        lines = evidence_lines(query, passages, max_chars=1200, max_passage_chars=300)
    else:
        lines = evidence_lines(query, passages, max_chars=2400, max_passage_chars=600)
    evidence = protocol.neutralise("\n".join(line for _, line in lines))
    ask = prompts.CANDIDATES_ASK.format(candidates="; ".join(candidates))
    return choose_option(model, prompts.reader_messages(evidence, question, ask), candidates, prompts.CHOICE_PREFILL)


def first_of_each_answer(answers: list[str]) -> list[int]:
    """The index of the first run giving each distinct answer (as normalize_answer compares them); runs
    without an answer are left out."""
    first_of: dict[str, int] = {}
    for i, answer in enumerate(answers):
        key = normalize_answer(answer)
        if key and key not in first_of:
            first_of[key] = i
    return list(first_of.values())


def chosen_run(model: ChatModel, question: str, answers: list[str], passages: list[list[dict]]) -> int | None:
    """The first of several runs' answers to one question giving the answer the model chooses among the
    distinct ones (choose_among_answers, every run's passages read together); None when fewer than two
    distinct answers were given (nothing to choose: no model call)."""
    indices = first_of_each_answer(answers)
    if len(indices) < 2:
        return None
    candidates = [answers[i].strip() for i in indices]
    choice = choose_among_answers(model, question, candidates, [p for run in passages for p in run])
    return indices[candidates.index(choice.label)]


class AnswerReading:
    """Reads from the session's `model`, `passages`, `worked`, `_messages()`, `_titles_in_view()`,
    `_sees_every_result()`, `read_by_quote`, `compare_by_facts`, `run_id` and `turn_count`."""

    model: ChatModel
    passages: list[dict]
    worked: list[str]
    read_from: list[str]
    read_by_quote: bool
    says_a_place: bool
    compare_by_facts: bool
    facts_by_kind: bool
    run_id: str

    def _evidence(self, question: str) -> list[tuple[str, str]]:
        """The run's passages most relevant to the question, whole paragraphs when the model can read
        them, as (title, line)."""
        if self.model.traits.small:  # a small model copies whatever long context it sees
            return evidence_lines(question, self.passages, max_chars=1200, max_passage_chars=300)
        budget = min(2400, self.model.traits.context_tokens * 2)
        return evidence_lines(question, self.passages, max_chars=budget, max_passage_chars=900)

    def _reader_messages(self, question: str, ask: str = "") -> list[dict]:
        """What the answer is read from. A model that saw every result in full reads it from its own
        conversation, which its prompt cache already holds; otherwise from the run's most relevant
        passages, chosen over the whole run so later searches never push the first ones out.
        `ask` replaces the plain request for the answer."""
        if self._reads_conversation():
            self.read_from = self._titles_in_view()
            messages = self._messages()
            ask = ask or prompts.READ_FROM_CONVERSATION.format(question=question)
            if messages[-1]["role"] == "user":
                return messages[:-1] + [{**messages[-1], "content": messages[-1]["content"] + "\n\n" + ask}]
            return messages + [{"role": "user", "content": ask}]
        evidence = self._evidence(question)
        self.read_from = list(dict.fromkeys(title for title, _ in evidence))
        lines = [line for _, line in evidence] + [prompts.WORKED_LINE.format(result=r) for r in self.worked]
        return prompts.reader_messages(protocol.neutralise("\n".join(lines)), question, ask)

    def _reads_conversation(self) -> bool:
        return self._sees_every_result() and bool(self.passages)

    @property
    def _quotes(self) -> bool:
        return self.read_by_quote and not self.model.traits.small

    def read_answer(self, question: Question, *, draft: bool = False) -> Generator[Event, None, str]:
        """The answer read from the evidence alone, as a short span. A closed question ("A or B?",
        "Between A and B, ...", a yes/no question) is answered by a constrained choice among its options;
        a larger model first copies each named option's fact, and a comparison of dates or amounts is
        then decided from those facts (backend.fact_comparison). Yes/no questions get no facts: on 16 `train`
        ones the facts changed nothing (11 right with them, 12 without). With `read_by_quote`
        (agent.read_by_quote) a larger model copies the sentence that states an open question's answer
        first: on 100 `train` bridge questions exact match rose from 32% to 39%, containment from 50% to
        51%. A `draft` (a guided turn's "is the answer found yet?") is read plain: a quoted draft tends
        to be the first hop's sentence, which the results state, so the search stopped one hop short."""
        text, options = question.text, list(question.options)
        if options:
            prefill = prompts.CHOICE_PREFILL
            named = list(question.choices)
            if named and self.compare_by_facts and not self.model.traits.small:
                comparison = comparison_of(text)
                compared = (comparison.kind if comparison else "") if self.facts_by_kind else None
                messages = self._reader_messages(text, prompts.option_facts_ask(
                    text, named, from_conversation=self._reads_conversation(), compared=compared))
                facts = self._option_facts(messages, named)
                yield ExecutorThought(self.run_id, turn=self.turn_count, text=prompts.option_facts_text(facts).strip())
                decided = decide(comparison, facts) if comparison else None
                if decided is not None:
                    yield Recovery(
                        self.run_id, turn=self.turn_count, reason=f"a comparison of {comparison.kind}s",
                        action=f"{decided!r} decided from the options' facts", routine=True,
                    )
                    return decided
                prefill = prompts.option_facts_text(facts) + prompts.CHOICE_PREFILL
            else:
                messages = self._reader_messages(text)
            choice = choose_option(self.model, messages, options, prefill)
            yield Recovery(
                self.run_id, turn=self.turn_count, reason="closed question: its answer is one of its options",
                action=f"chose {choice.label!r} among {options} by log-probability", routine=True,
            )
            return choice.label
        answer = yield from self._read_open(question, draft=draft)
        if not draft and answer and restates_its_subject(answer, question):
            # On `train` every such answer of the Executor alone was wrong (8 of 80): "Damon Lamon
            # Stoudamire" for "Which of Damon Stoudamire's cousins ...?", read from the first hop's page.
            again = yield from self._read_open(question, draft=False, not_this=answer)
            better = again if again and not restates_its_subject(again, question) else ""
            yield Recovery(self.run_id, turn=self.turn_count, reason=f"{answer!r} is what the question names, not its answer",
                           action=f"read again: {better!r}" if better else f"read again: nothing else found; {answer!r} kept")
            return better or answer
        return answer

    def _read_open(self, question: Question, *, draft: bool, not_this: str = "") -> Generator[Event, None, str]:
        """An open question's answer as a short span, by quote where that is on; `not_this`, an answer
        already read that the question itself names, is said not to be it. A final read of a question
        asking where is told the answer is a place (`says_a_place`): with both gold paragraphs in front
        of it the reader answered "Where ...?" with what the question is about ("Greenland shark",
        "State Capitol", "The Frost Place"); told, on the 12 such `train` bridge questions, 8 answers
        held the gold one instead of 5 and 6 matched it exactly instead of 2 (docs/evaluation.md). A
        draft is read without it: it decides whether the search goes on, and was not measured so."""
        note = prompts.NOT_THE_ANSWER.format(answer=not_this) if not_this else ""
        if self.says_a_place and not draft and question.asks_where:
            note = prompts.A_PLACE + note
        text = question.text
        prefill = prompts.ANSWER_PREFILL
        quote = None
        if self._quotes and not draft:
            messages = self._reader_messages(text, prompts.quote_ask(
                text, from_conversation=self._reads_conversation()) + note)
            written = self.model.generate(messages, max_new_tokens=48, stop=("\n",), prefill=prompts.QUOTE_PREFILL).text
            quote = " ".join(written.split())
        if quote is not None:
            quoted = f"{prompts.QUOTE_PREFILL} {quote}"
            yield ExecutorThought(self.run_id, turn=self.turn_count, text=quoted)
            prefill = f"{quoted}\n{prompts.ANSWER_PREFILL}"
        else:
            messages = self._reader_messages(text, prompts.plain_ask(text, note=note,
                                                                     from_conversation=self._reads_conversation()))
        completion = None
        for item in self.model.stream(messages, max_new_tokens=32, stop=("\n\n",), prefill=prefill):
            if isinstance(item, Completion):
                completion = item
            elif item:
                yield TextDelta(self.run_id, turn=self.turn_count, text=item)
        # The first non-empty line: small models often open with a line break before the answer.
        lines = [clean_query(line) for line in (completion.text if completion else "").splitlines()]
        return next((line.strip(" .") for line in lines if line.strip(" .")), "")

    def _option_facts(self, messages: list[dict], options: list[str]) -> dict[str, str]:
        """Each option's fact, one line each, every line prefilled with its option's name (one growing
        prefix, so the prompt cache serves each next line)."""
        facts: dict[str, str] = {}
        for option in options:
            prefill = prompts.option_facts_text(facts) + f"{option}:"
            completion = self.model.generate(messages, max_new_tokens=28, stop=("\n",), prefill=prefill)
            facts[option] = " ".join(completion.text.split())
        return facts
