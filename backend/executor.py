"""The Executor: follows the blueprint in a ReAct loop with tools and gives the final answer.

One `ExecutorSession` per question keeps the conversation, so that after a reflection the
Executor continues from where it stopped with the supplementary plan. Every turn is reported as
events; when the model's output is unusable the session recovers and says how.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Generator, Iterator, Mapping

from backend import protocol
from backend.evidence import citations, is_grounded, passages_naming, shares_a_question_word, stating_sentence
from backend.events import (AnswerReady, Event, ExecutorThought, HopAnswered, Recovery, StepTaken, TextDelta, ToolCalled,
                            ToolReturned)
from backend.llm.base import ChatModel, Completion
from backend.metering import RunMeter
from backend.planner import is_search_step, search_query
from backend.prompts import executor as prompts
from backend.prompts.manager import IMAGE_TEXT_SOURCE
from backend.protocol import clean_query
from backend.question import Question
from backend.reader import AnswerReading
from backend.hops import Hop, answered_yes_or_no, restates_its_subject
from backend.image_gaps import gap_query
from backend.tools.base import Tool, ToolCapabilities, ToolResult, query_tool, tool_prompt_lines
from backend.tools.page_links import PageLink, base_name
from backend.tools.text_ranking import split_sentences
from backend.answer_match import answer_contains

KEEP_FULL_RESPONSES = 2  # older tool responses are shown to the model as titles only


@dataclass
class Step:
    """One entry of the Executor's trace, kept for reflection, consolidation and rewards."""

    turn: int
    think: str = ""
    tool: str | None = None
    arguments: dict = field(default_factory=dict)
    ok: bool | None = None
    titles: list[str] = field(default_factory=list)
    answer: str | None = None
    recovery: str | None = None
    format_problems: list[str] = field(default_factory=list)


@dataclass
class _Turn:
    role: str
    content: str
    short: str | None = None  # what older tool responses shrink to
    titles: tuple[str, ...] = ()  # a tool response's passages


class ExecutorSession(AnswerReading):
    def __init__(
        self,
        model: ChatModel,
        tools: Mapping[str, Tool],
        meter: RunMeter,
        run_id: str,
        *,
        max_new_tokens: int = 192,
        image: str | None = None,
        max_llm_calls: int = 0,
        max_tokens: int = 0,
        guided: bool = False,
        compare_by_facts: bool = True,
        read_by_quote: bool = False,
        follow_links: bool = False,
        says_a_place: bool = True,
        facts_by_kind: bool = False,
    ) -> None:
        self.model, self.tools, self.meter, self.run_id = model, tools, meter, run_id
        self.max_new_tokens = max_new_tokens
        self.max_llm_calls, self.max_tokens = max_llm_calls, max_tokens
        self.guided = guided
        self.compare_by_facts = compare_by_facts  # a larger model copies each option's fact before choosing
        self.read_by_quote = read_by_quote  # a larger model copies the answer's sentence before a final open answer
        self.follow_links = follow_links  # a guided turn searches the page the results name that an open question needs next
        self.says_a_place = says_a_place  # a final read of a "where" question is told the answer is a place (AnswerReading)
        self.facts_by_kind = facts_by_kind  # the options' facts asked for as what the question compares (AnswerReading)
        self.links_followed: list[str] = []
        self.hops_researched: list[Hop] = []  # a plan's sub-questions as researched (a redone hop again)
        self.last_finish_reason = ""
        self.plan_steps: list[str] = []
        self.question: Question | None = None  # set by start
        self._before_replan: tuple[str, int, list[str]] | None = None  # answer, tool calls, read_from
        self.image = image
        self.image_heading = ""  # the heading of the text OCR read in the image (backend.image_gaps)
        self._image_text_shown: str | None = None  # its passage's title once the first turn shows it
        self.thread_passages: list[dict] = []  # a follow-up: the thread's earlier passages, shown in the first turn (reuse)
        self.turns: list[_Turn] = []
        self.steps: list[Step] = []
        self._steps_reported = 0
        self.passages: list[dict] = []
        self.worked: list[str] = []  # results of tools that gather no evidence ("1963 - 1914 = 49"), for the reader
        self.answer: str = ""
        self.read_from: list[str] = []  # titles of the passages in front of the model when it last answered
        self.turn_count = 0
        self.tool_calls_made = 0

    # -- conversation -----------------------------------------------------------------------
    def _messages(self) -> list[dict]:
        messages = [prompts.system_message(tool_prompt_lines(self.tools.values()))]
        keep = self._responses_in_full()
        for i, turn in enumerate(self.turns):
            content = turn.content if (turn.short is None or i in keep) else turn.short
            messages.append({"role": turn.role, "content": content})
        if self.image and self.model.supports_images and len(messages) > 1:
            messages[1] = {**messages[1], "image": self.image}
        return messages

    def _responses_in_full(self) -> set[int]:
        """The turns of tool responses the model is shown in full; older ones shrink to their titles.
        A small model is shown only the latest results in full. A larger one sees every result: the
        conversation then only grows, so a local model's prompt cache serves each next turn whole."""
        responses = [i for i, t in enumerate(self.turns) if t.short is not None]
        return set(responses if responses and self._sees_every_result() else responses[-KEEP_FULL_RESPONSES:])

    def _titles_in_view(self) -> list[str]:
        """The passages the conversation shows in full, by title, each once."""
        shown = self._responses_in_full()
        image = [self._image_text_shown] if self._image_text_shown else []
        image += [p["title"] for p in self.thread_passages]
        return list(dict.fromkeys(image + [title for i in sorted(shown) for title in self.turns[i].titles]))

    def _sees_every_result(self) -> bool:
        """A larger model whose conversation fits its context sees every tool result in full."""
        traits = self.model.traits
        return not traits.small and sum(len(t.content) for t in self.turns) < traits.context_tokens * 2  # ~4 chars a token

    def _append_user(self, content: str, short: str | None = None) -> None:
        # Consecutive user turns are merged: chat templates expect alternating roles.
        if self.turns and self.turns[-1].role == "user" and self.turns[-1].short is None and short is None:
            self.turns[-1].content += "\n\n" + content
        else:
            self.turns.append(_Turn("user", content, short))

    def start(self, question: Question, plan_steps: list[str], caption: str | None = None, context: str | None = None) -> None:
        """The first user turn: the question, the plan if there is one, and past research as data."""
        self.plan_steps = list(plan_steps)
        self.question = question
        image_text = self._image_text()
        self._image_text_shown = image_text["title"] if image_text else None
        self._append_user(prompts.question_turn(question.text, plan_steps, caption, context, image_text))
        if self.thread_passages:
            self._append_user(prompts.thread_passages_text(self.thread_passages))

    def reuse(self, passages: list[dict]) -> None:
        """A follow-up's session: the thread's earlier passages are evidence here as the search results
        are (the reader reads them, an answer cites them), and the first turn shows them."""
        self.thread_passages = [dict(p) for p in passages]
        self.passages.extend(self.thread_passages)

    def _image_text(self) -> dict | None:
        """The passage of the text OCR read in the question's image (the first turn shows it whole)."""
        return next((p for p in self.passages if p.get("source") == IMAGE_TEXT_SOURCE), None)

    def add_supplementary_plan(self, plan_steps: list[str]) -> None:
        self._before_replan = (self.answer, self.tool_calls_made, list(self.read_from))
        self.plan_steps = list(plan_steps) + self.plan_steps
        self._append_user(prompts.supplementary_plan_turn(plan_steps))

    # -- one turn ---------------------------------------------------------------------------
    def _generate(self, prefill: str, stop: tuple[str, ...], max_new_tokens: int) -> str:
        completion = self.model.generate(
            self._messages(), max_new_tokens=max_new_tokens, stop=stop, prefill=prefill
        )
        return prefill + completion.text

    def _stream_text(self, prefill: str, stop: tuple[str, ...], max_new_tokens: int) -> Generator[Event, None, str]:
        """Generate after `prefill`, yielding the text as it forms; returns prefill + text."""
        completion = None
        for item in self.model.stream(self._messages(), max_new_tokens=max_new_tokens, stop=stop, prefill=prefill):
            if isinstance(item, Completion):
                completion = item
            elif item:
                yield TextDelta(self.run_id, turn=self.turn_count, text=item)
        assert completion is not None, "a ChatModel stream ends with its Completion"
        self.last_finish_reason = completion.finish_reason
        return prefill + completion.text

    def _run_tool(self, name: str, arguments: dict) -> Iterator[Event]:
        turn = self.turn_count
        tool = self.tools.get(name)
        capabilities = tool.capabilities if tool is not None else ToolCapabilities()
        if capabilities.needs_image and self.image:
            # Always the uploaded image: a path written by the model must never reach the file system.
            arguments = {"image": self.image}
        yield ToolCalled(self.run_id, turn=turn, name=name, arguments=arguments)
        start = time.perf_counter()
        refusal = None
        if tool is None:
            refusal = f"unknown tool {name!r}; available tools: {', '.join(self.tools)}"
        elif capabilities.once_per_question and any(s.tool == name for s in self.steps):
            refusal = f"{name} was already used for this question (once per question); use the other tools"
        elif capabilities.needs_image and not self.image:
            refusal = f"no image came with this question, so there is nothing to search with {name}"
        if refusal:
            result = ToolResult(name=name, arguments=arguments, ok=False, content="", passages=[], error=refusal)
        else:
            result = tool(arguments)
        self.meter.add_tool(time.perf_counter() - start)
        self.tool_calls_made += 1
        passages = [asdict(p) for p in result.passages]
        self.passages.extend(passages)
        if result.ok and capabilities.text_argument is not None:
            self.worked.append(result.content)
        step = Step(turn=turn, tool=name, arguments=arguments, ok=result.ok, titles=[p["title"] for p in passages])
        self.steps.append(step)
        yield ToolReturned(
            self.run_id,
            turn=turn,
            name=name,
            ok=result.ok,
            content=result.content,
            passages=passages,
            error=result.error,
            seconds=result.seconds,
        )
        body = result.content if result.ok else f"Error: {result.error}"
        short = prompts.EARLIER_RESULTS.format(tool=name, titles=", ".join(step.titles) or "none")
        self.turns.append(_Turn("user", protocol.format_tool_response(body), short, tuple(step.titles)))

    def search(self, tool_name: str, query: str, head: str = "") -> Iterator[Event]:
        """Call a query tool with one query, written into the conversation as the model's own call
        (after `head`, the turn's thought)."""
        argument = self.tools[tool_name].capabilities.query_argument
        opening = prompts.query_opening(tool_name, argument)
        self._record_assistant(head + opening + query.replace('"', "'") + prompts.QUERY_CLOSING + protocol.CALL_CLOSE)
        yield from self._run_tool(tool_name, {argument: [query]})

    def _record_assistant(self, text: str) -> None:
        self.turns.append(_Turn("assistant", text))

    def _recover(self, question: Question, raw: str, reason: str) -> Iterator[Event]:
        """The turn's output was unusable: search the question itself first, later let a
        constrained choice pick search or answer and prefill the chosen action."""
        turn = self.turn_count
        search = self.search_tool()
        if self.tool_calls_made == 0 and search is not None:
            yield Recovery(self.run_id, turn=turn, reason=reason, action="searching the question itself", raw=raw)
            self._record_assistant(protocol.THINK_OPEN + protocol.THINK_CLOSE)
            self.steps.append(Step(turn=turn, recovery=reason))
            yield from self._run_tool(search.name, {search.capabilities.query_argument: [question.text]})
            return
        if search is None:
            label = "answer"
        else:
            label = self.model.choose(self._messages() + [{"role": "user", "content": prompts.NEXT_ACTION_ASK}],
                                      ["search", "answer"]).label
        if label == "answer":
            yield Recovery(self.run_id, turn=turn, reason=reason, action="constrained choice: answer now", raw=raw)
            self.steps.append(Step(turn=turn, recovery=reason))
            yield from self._answer_with_prefill(forced=False, reason="")
            return
        yield Recovery(self.run_id, turn=turn, reason=reason, action="constrained choice: search; query generated", raw=raw)
        opening = prompts.query_opening(search.name, search.capabilities.query_argument)
        text = self._generate(opening, ('"', "\n"), 40)
        query = yield from self._fresh_query(text[len(opening):], question)
        self.steps.append(Step(turn=turn, recovery=reason))
        if query is None:
            yield from self._answer_with_prefill(forced=False, reason="", question=question)
            return
        yield from self.search(search.name, query)

    def search_tool(self) -> Tool | None:
        return query_tool(self.tools)

    def _fresh_query(self, generated: str, question: Question) -> Generator[Event, None, str | None]:
        """The generated query cleaned of markup; if it is empty or was searched already, the first
        unsearched of the question, its names and the plan steps (said as a Recovery); None if all were."""
        query = clean_query(generated)
        if query and query.lower() not in self.searched_queries():
            return query
        fallback = self._unsearched_query(question)
        reason = f"generated query {query!r} is empty or already searched"
        action = "nothing new to search: answering" if fallback is None else f"searching {fallback!r} instead"
        yield Recovery(self.run_id, turn=self.turn_count, reason=reason, action=action)
        return fallback

    def _answer_with_prefill(self, *, forced: bool, reason: str, question: Question | None = None) -> Iterator[Event]:
        if self.guided and question is not None:
            answer = yield from self.read_answer(question)
        else:
            self.read_from = self._titles_in_view()
            text = self._generate(protocol.ANSWER_OPEN, (protocol.ANSWER_CLOSE, "\n"), 48)
            answer = text[len(protocol.ANSWER_OPEN) :].strip()
            if question is not None and (not answer or question.closed):
                # Never an empty answer (a model may close the prefilled tag at once), and a closed
                # question is answered by a choice among its options.
                answer = (yield from self.read_answer(question)) or answer
        self._record_assistant(protocol.ANSWER_OPEN + answer + protocol.ANSWER_CLOSE)
        self.answer = answer
        self.steps.append(Step(turn=self.turn_count, answer=answer))
        yield self._answer_ready(answer, forced=forced, reason=reason)

    def _answer_ready(self, answer: str, *, forced: bool = False, reason: str = "", taught: dict | None = None) -> AnswerReady:
        """The event of an answer: its citations and the passages the model had in front of it."""
        return AnswerReady(self.run_id, text=answer, forced=forced, reason=reason, sources=self.sources(answer),
                           read_from=list(self.read_from), taught=taught)

    def answer_with(self, answer: str, *, taught: dict | None = None) -> AnswerReady:
        """Give an answer composed outside the model's turns (a person's, recalled from memory:
        `taught`; a plan of sub-questions' last answer) as the conversation's last turn, cited to the
        retrieved passages that state it."""
        self.read_from = self._titles_in_view()
        self._record_assistant(protocol.ANSWER_OPEN + answer + protocol.ANSWER_CLOSE)
        self.answer = answer
        self.steps.append(Step(turn=self.turn_count, answer=answer))
        return self._answer_ready(answer, taught=taught)

    def read_again(self, question: Question, *, not_this: str) -> Generator[Event, None, str]:
        """An open question's answer read again from the evidence, told that `not_this` is not it (an
        answer of another kind than the question asks for: backend.answer_kind)."""
        return (yield from self._read_open(question, draft=False, not_this=not_this))

    def sentences_naming(self, text: str) -> list[tuple[str, str]]:
        """(title, sentence) of the retrieved sentences that hold `text` as whole words, in the order they
        were retrieved."""
        return [(p.get("title", ""), sentence) for p in self.passages
                for sentence in split_sentences(" ".join((p.get("text") or "").split())) if answer_contains(sentence, text)]

    def add_derived_hop(self, question: str, answer: str, sentence: str) -> None:
        """A fact the run's answer rests on that no hop of the plan asked (the country a sentence names
        beside the state first read: backend.answer_kind), so that the sentence stating it is cited."""
        number = max((hop.number for hop in self.hops_researched), default=0) + 1
        self.hops_researched.append(Hop(number=number, template=question, question=question, answer=answer,
                                        sentence=sentence))

    def sources(self, answer: str, limit: int = 3) -> list[dict]:
        """The retrieved passages the answer rests on, numbered, with the sentence that supports it
        (backend.evidence.citations); none when no retrieved passage supports it."""
        stated = {hop.number: (hop.asked, hop.answer, hop.sentence) for hop in self.hops_researched if hop.stated}
        return citations(answer, self.question, self.passages, limit=limit, hops=list(stated.values()))

    def _guided_turn(self, question: Question) -> Iterator[Event]:
        """One turn for a small model: free thought, then a constrained choice of action, then the
        action's opening prefilled so only its argument is generated. Same protocol text results."""
        turn = self.turn_count
        guided = {n: t.capabilities for n, t in self.tools.items() if t.capabilities.guided}
        used = {s.tool for s in self.steps}
        options = [n for n, c in guided.items()
                   if not (c.needs_image and not self.image) and not (c.once_per_question and n in used)]
        evidence_options = [n for n in options if guided[n].gathers_evidence]  # a calculator is offered, never forced
        searches = sum(1 for s in self.steps if s.tool in guided and guided[s.tool].gathers_evidence and s.ok)
        # Follow the blueprint: at least one search, and up to two when the plan has several search steps
        # (or, for a larger model, when the question names two things to compare).
        needed = min(2, max(1, sum(is_search_step(p) for p in self.plan_steps)))
        if not self.model.traits.small and question.closed:
            needed = 2
        must_search = searches < needed and bool(evidence_options)
        # The image first when one came with the question (the image index has its turn), else the first query tool.
        by_image = [n for n in evidence_options if guided[n].needs_image] if self.image else []
        query_tools = [] if by_image else [n for n in evidence_options if guided[n].query_argument]
        routine = self._routine_search(question, query_tools, must_search)
        if routine is not None:
            tool, query, reason = routine
            yield Recovery(self.run_id, turn=turn, reason=reason, action=f"searching {query!r}", routine=True)
            yield from self.search(tool, query)
            return
        if not must_search and self._sees_every_result():
            # A larger model drafts the answer from its conversation (cached: a second or two) and
            # stops as soon as the draft is one the results state; otherwise it searches on.
            draft = yield from self.read_answer(question, draft=True)
            # A draft that repeats a word of the question is taken only after a second search (18% of
            # `train` answers do, and so does the bridge entity of many bridge questions).
            grounded = is_grounded(draft, question.text, self.passages) and (
                searches >= 2 or not shares_a_question_word(draft, question.text) or self.image_states(draft, question))
            if question.closed or grounded or not evidence_options:
                # The draft decides when to stop; the final answer is read by quote where that is on.
                final = draft if question.closed or not self._quotes else None
                yield from self._guided_answer(question, "", "", answer=final)
                return
            yield ExecutorThought(self.run_id, turn=turn, text=f"Draft answer {draft!r} is not stated in the results yet; searching on.",
                                  draft=draft or None)
            must_search = True
        thought, head = "", ""
        if not must_search:  # a thought is only worth its time when it informs the choice of action
            stops = (protocol.THINK_CLOSE, protocol.CALL_OPEN, protocol.ANSWER_OPEN, protocol.RESPONSE_OPEN, "\n")
            thought_text = yield from self._stream_text(protocol.THINK_OPEN, stops, 48)
            thought = thought_text[len(protocol.THINK_OPEN):].strip()
            if thought:
                yield ExecutorThought(self.run_id, turn=turn, text=thought)
            head = f"{protocol.THINK_OPEN}{thought}{protocol.THINK_CLOSE}\n"
        if must_search:
            action = by_image[0] if by_image else next(
                (n for n in evidence_options if guided[n].query_argument), evidence_options[0])
            reason = ("guided turn: no evidence yet" if searches == 0 else "guided turn: the draft answer is not grounded"
                      if searches >= needed else f"guided turn: {needed} searches are needed")
            yield Recovery(self.run_id, turn=turn, reason=reason, action=f"{'first' if searches == 0 else 'next'} action is {action}",
                           routine=True)
        else:
            choice = self.model.choose(self._messages(), [*options, "answer"], prefill=head + prompts.NEXT_ACTION_PREFILL)
            action = choice.label
        if action == "answer":
            yield from self._guided_answer(question, head, thought)
            return
        if guided[action].needs_image:
            call = prompts.IMAGE_CALL.format(tool=action)
            self._record_assistant(head + protocol.CALL_OPEN + call + protocol.CALL_CLOSE)
            yield from self._run_tool(action, {"image": self.image})
            return
        if guided[action].text_argument:
            yield from self._text_call(action, guided[action].text_argument, head, thought)
            return
        opening = prompts.query_opening(action, guided[action].query_argument)
        # The query is written straight after the call's opening: a small model's thought tends to
        # be copied into it otherwise.
        text = self._generate(opening, ('"', "\n"), 24)
        query = yield from self._fresh_query(text[len(opening):], question)
        if query is None:
            yield from self._guided_answer(question, head, thought)
            return
        yield from self.search(action, query, head)
        if self.steps:
            self.steps[-1].think = thought

    def _routine_search(self, question: Question, query_tools: list[str], must_search: bool) -> tuple[str, str, str] | None:
        """(tool, query, why) of a search a guided turn makes without the model: what the question's
        image text leaves to search; once the needed searches are made, the other of two named things
        the question asks about, or the page the results name that it needs next. None: the model acts."""
        gap = self._image_gap(question, query_tools)
        if gap is not None:
            return (*gap, "the image's text does not cover this")
        if must_search:
            return None
        other = self._other_of_pair(question)
        if other is not None:
            return (*other, "the question asks about two things: each is searched")
        link = self._link_to_follow(question)
        if link is not None:
            tool, page = link
            self.links_followed.append(page.title)
            return tool, page.title, f"following a link: {page.named_in!r} names it, and the question's words point there"
        return None

    def _other_of_pair(self, question: Question) -> tuple[str, str] | None:
        """(query tool, name) of the one of the two things an open question asks about together that
        no search has looked up yet (by its name, or a result titled with it); with follow_links only,
        after the first search. On `train` such questions followed a link or the model's own query
        instead, and missed the other thing's page ("Chamelaucium and Vanilla" -> "Myrtaceae")."""
        pair = question.pair if self.follow_links and self.passages else ()
        tool = self.search_tool()
        if not pair or tool is None:
            return None
        done = self.searched_queries() | {base_name(p["title"]).casefold() for p in self.passages}
        name = next((n for n in pair if n.casefold() not in done), None)
        return (tool.name, name) if name else None

    def _link_to_follow(self, question: Question) -> tuple[str, PageLink] | None:
        """(tool, link) of the page the retrieved passages name that an open question most likely needs
        next (its bridge page: the first search finds the page the question names, and that page names
        the one holding the answer); once per question, None for a closed question or when no tool
        links pages. On `train`, the second paragraph of most bridge questions the Executor alone missed
        after finding the first was named in the first (backend.tools.page_links)."""
        if not self.follow_links or self.links_followed or question.closed or question.pair or not self.passages:
            return None
        tool = next((t for t in self.tools.values() if t.capabilities.links_pages), None)
        if tool is None:
            return None
        link = tool.linked_page(question.text, self.passages)
        if link is None or link.title.lower() in self.searched_queries():
            return None
        return tool.name, link

    def _image_gap(self, question: Question, query_tools: list[str]) -> tuple[str, str] | None:
        """(tool, query) for what the question's image text leaves to search (backend.image_gaps); None
        without image text or a query tool."""
        if not query_tools or self._image_text() is None:
            return None
        titles = [p["title"] for p in self.passages if p.get("source") != IMAGE_TEXT_SOURCE]
        query = gap_query(question, self.image_heading, titles, self.searched_queries())
        return (query_tools[0], query) if query else None

    def image_states(self, answer: str, question: Question) -> bool:
        """The text OCR read in the question's own image states the answer: the person's evidence, not
        a bridge entity a first search found."""
        return bool(stating_sentence(answer, question.text, [p for p in self.passages if p.get("source") == IMAGE_TEXT_SOURCE]))

    def _text_call(self, action: str, argument: str, head: str, thought: str) -> Iterator[Event]:
        """A tool that gathers no evidence (a calculator), its one text argument written after the
        call's prefilled opening."""
        opening = prompts.text_opening(action, argument)
        text = self._generate(opening, ('"', "\n"), 32)[len(opening):].strip()
        self._record_assistant(head + opening + text.replace('"', "'") + prompts.TEXT_CLOSING + protocol.CALL_CLOSE)
        yield from self._run_tool(action, {argument: text})
        if self.steps:
            self.steps[-1].think = thought

    def _guided_answer(self, question: Question, head: str, thought: str, answer: str | None = None) -> Iterator[Event]:
        if answer is None:
            answer = yield from self.read_answer(question)
        self._record_assistant(head + protocol.ANSWER_OPEN + answer + protocol.ANSWER_CLOSE)
        self.answer = answer
        self.steps.append(Step(turn=self.turn_count, think=thought, answer=answer))
        yield self._answer_ready(answer)

    def settle_after_replan(self) -> Iterator[Event]:
        """An answer changes only after more research: when the supplementary round called no tool, the
        answer from before the replan stands (seen on `train`: a replan that searched nothing turned a
        right "no" into "yes")."""
        if self._before_replan is None:
            return
        answer, tool_calls, read_from = self._before_replan
        self._before_replan = None
        if answer.strip() and self.answer != answer and self.tool_calls_made == tool_calls:
            self.answer, self.read_from = answer, read_from
            yield Recovery(self.run_id, turn=self.turn_count, reason="the supplementary round researched nothing",
                           action=f"the answer from before the replan stands: {answer!r}")
            yield self._answer_ready(answer)

    def answer_support(self, question: Question, max_chars: int = 240) -> str | None:
        """The retrieved sentence that states the answer ("Title: sentence"), "" if none does. For a
        closed question, whose answer ("yes", one of two names) no single sentence states, the cited
        sentence about each option (or about the question), None when nothing was retrieved."""
        if question.closed:
            cited = citations(self.answer, question, self.passages, max_chars=max_chars // 2)
            return " | ".join(f"{c['title']}: {c['sentence']}" for c in cited) or None
        return stating_sentence(self.answer, question.text, self.passages, max_chars=max_chars)

    def queries(self) -> list[str]:
        """The queries searched so far, in order, each once."""
        found = [q for step in self.steps for q in self._step_queries(step)]
        return list(dict.fromkeys(found))

    def searched_queries(self) -> set[str]:
        return {q.lower() for q in self.queries()}

    def _step_queries(self, step: Step) -> list[str]:
        queries = self._queries(step) or []
        return [queries] if isinstance(queries, str) else [q for q in queries if isinstance(q, str)]

    def _queries(self, step: Step):
        """The queries of a tool call, read from the argument its tool declares (None if it takes none)."""
        tool = self.tools.get(step.tool or "")
        argument = tool.capabilities.query_argument if tool is not None else None
        return step.arguments.get(argument) if argument else None

    def _unsearched_query(self, question: Question) -> str | None:
        """The question, then the names in it, then what each search step of the plan looks up: the
        first not searched yet (or None). A step that is not a search is never sent as a query."""
        done = self.searched_queries()
        plan_queries = [query for query in map(search_query, self.plan_steps) if query]
        for candidate in [question.text, *question.names, *plan_queries]:
            candidate = clean_query(candidate)
            if candidate and candidate.lower() not in done:
                return candidate
        return None

    # -- the loop ---------------------------------------------------------------------------
    def limit_reached(self, deadline: float) -> str | None:
        """Why the run must stop researching now (time, LLM calls, tokens), or None."""
        if time.monotonic() >= deadline:
            return "time limit reached"
        if self.max_llm_calls and self.meter.llm_calls >= self.max_llm_calls:
            return f"LLM call limit ({self.max_llm_calls}) reached"
        if self.max_tokens and self.meter.prompt_tokens + self.meter.completion_tokens >= self.max_tokens:
            return f"token limit ({self.max_tokens}) reached"
        return None

    def run(self, question: Question, *, max_turns: int, deadline: float) -> Iterator[Event]:
        """Turns until an answer, the turn cap or another limit; at a limit the answer is forced. The
        round's steps follow as StepTaken events."""
        yield from self._turns(question, max_turns=max_turns, deadline=deadline)
        yield from self.report_steps()

    def report_steps(self) -> Iterator[Event]:
        """StepTaken events for the steps taken since the last report."""
        for step in self.steps[self._steps_reported:]:
            yield StepTaken(self.run_id, step=asdict(step))
        self._steps_reported = len(self.steps)

    def _turns(self, question: Question, *, max_turns: int, deadline: float) -> Iterator[Event]:
        self.answer = ""
        turns_here = 0
        while turns_here < max_turns:
            reason = self.limit_reached(deadline)
            if reason:
                self._append_user(prompts.FORCE_ANSWER)
                yield from self._answer_with_prefill(forced=True, reason=reason, question=question)
                return
            turns_here += 1
            self.turn_count += 1
            if self.guided:
                yield from self._guided_turn(question)
                if self.answer:
                    return
                continue
            text = yield from self._stream_text(protocol.THINK_OPEN, protocol.STOP_STRINGS, self.max_new_tokens)
            if self.last_finish_reason == "stop":
                if protocol.CALL_OPEN in text and protocol.CALL_CLOSE not in text:
                    text += protocol.CALL_CLOSE
                elif protocol.ANSWER_OPEN in text and protocol.ANSWER_CLOSE not in text:
                    text += protocol.ANSWER_CLOSE
            action = protocol.parse_action(text)
            if action.think:
                yield ExecutorThought(self.run_id, turn=self.turn_count, text=action.think)
            if action.is_answer:
                self.read_from = self._titles_in_view()  # the model answered from its conversation
                self._record_assistant(text)
                self.answer = (action.answer or "").strip()
                if not self.answer or question.closed:
                    self.answer = (yield from self.read_answer(question)) or self.answer
                self.steps.append(Step(turn=self.turn_count, think=action.think, answer=self.answer,
                                       format_problems=action.format_problems))
                yield self._answer_ready(self.answer)
                return
            if action.is_tool_call:
                self._record_assistant(text)
                yield from self._run_tool(action.tool_name or "", action.arguments)
                if self.steps:
                    self.steps[-1].think = action.think
                    self.steps[-1].format_problems = action.format_problems
                continue
            yield from self._recover(question, text, action.error or "unusable output")
            if self.answer:
                return
        self._append_user(prompts.FORCE_ANSWER)
        yield from self._answer_with_prefill(forced=True, reason=f"turn limit ({max_turns}) reached", question=question)

    def research_hop(self, hop: Hop, *, max_searches: int = 2, other_queries: tuple[str, ...] = (),
                     subjects: tuple[str, ...] = ()) -> Generator[Event, None, None]:
        """Research one sub-question (backend.hops): search it, read its answer as a short span, and
        when no retrieved sentence states that answer, search again by its names (then by
        `other_queries`) and read again. The hop keeps its answer, the sentence and its queries.
        An answer that is what the hop names (backend.hops.restates_its_subject) is stated by nothing.
        `subjects`, the earlier answers the hop asks about, must be named by the stating sentence's
        passage: a sentence elsewhere that happens to hold the span says nothing about them (on
        `train`: "Beijing" for "In which city was Mantua located?", from a passage on Shijiazhuang)."""
        search = self.search_tool()
        self.turn_count += 1
        asked = hop.asked
        candidates = (asked.text, *asked.names, *other_queries)
        for _ in range(max_searches if search is not None else 0):
            done = self.searched_queries()
            query = next((q for q in (clean_query(c) for c in candidates) if q and q.lower() not in done), None)
            if query is None:
                break
            hop.queries.append(query)
            yield from self.search(search.name, query)
            hop.answer = yield from self.read_answer(asked)
            hop.sentence = self._hop_sentence(hop, subjects)
            if hop.stated or self._answered_on_its_page(hop):
                break
        if search is None or not hop.queries:
            hop.answer = yield from self.read_answer(asked)
            hop.sentence = self._hop_sentence(hop, subjects)
        self.hops_researched.append(hop)
        yield HopAnswered(self.run_id, turn=self.turn_count, **hop.to_dict())
        yield from self.report_steps()

    def research_as_question(self, hop: Hop, question: Question, *, max_turns: int, deadline: float) -> Iterator[Event]:
        """Research a plan's only sub-question (the question, or a narrower wording of what it asks) by
        the Executor's own turns for the question: search, read, search again while the answer is not
        found, as the Executor alone researches. On the first 20 `train` questions (hybrid search) 11
        plans were one hop, and research_hop's single search with the hop's words answered 4 of them
        where the Executor alone answered 5. The hop's answer is the question's."""
        hop.question = hop.template
        yield from self.run(question, max_turns=max_turns, deadline=deadline)
        hop.answer = self.answer
        hop.sentence = "" if restates_its_subject(self.answer, question) else (self.answer_support(question) or "")
        hop.queries = self.queries()
        yield HopAnswered(self.run_id, turn=self.turn_count, **hop.to_dict())

    def _answered_on_its_page(self, hop: Hop) -> bool:
        """A yes/no hop read with a page naming what it asks about in view: no sentence states "no",
        and a second search by its names ("Rubén Darío English") brought pages on the property
        ("English literature") that turned a right "no" into "yes" (`train`)."""
        return answered_yes_or_no(hop) and bool(passages_naming(self.passages, list(hop.asked.names)))

    def _hop_sentence(self, hop: Hop, subjects: tuple[str, ...]) -> str:
        """The retrieved sentence that states the hop's answer, in a passage naming its subjects; ""
        when none does, or when the answer is what the hop itself names."""
        if restates_its_subject(hop.answer, hop.asked):
            return ""
        return stating_sentence(hop.answer, hop.asked.text, passages_naming(self.passages, list(subjects)))

    def trace_text(self, max_chars: int = 1200) -> str:
        """A compact account of what was done, for reflection and consolidation prompts."""
        lines = []
        for step in self.steps:
            if step.tool:
                query = self._queries(step) or step.arguments
                found = ", ".join(step.titles[:3]) or ("error" if not step.ok else "nothing")
                lines.append(f"- {step.tool} {query}: {found}")
            elif step.answer is not None:
                lines.append(f"- answered: {step.answer}")
        text = "\n".join(lines)
        return text[-max_chars:]
