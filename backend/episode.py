"""One research episode: caption, retrieve memories, plan, execute, reflect and replan, judge,
consolidate. The app's agent, the evaluation harness, the GRPO trainer, test-time rollouts, the
canary and the verl agent loops all run this loop; what differs is given to it:

- the method (backend.methods): what memory is read and how it is shown, whether the Planner plans
  and reflects, how the run is stored;
- the models: a training run passes a policy that samples and records its tokens;
- the judge: the app's Judge, or training's ground-truth grader;
- the store: None for training (no memory is read or written);
- a given plan (GRPO stage 1) or given memory text (training datasets).

`EpisodeLoop.run` yields typed events (backend.events); the run's outcome is then on `outcome`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field

from backend import protocol
from backend.config import MemoryConfig
from backend.documents.ocr import read_image_text
from backend.events import (
    AnswerReady,
    Event,
    MemoriesRetrieved,
    MemoryStored,
    PlanReady,
    Recovery,
    ReflectionDecided,
    RunFinished,
    RunStarted,
    VerdictReady,
)
from backend.executor import ExecutorSession
from backend.judge import CORRECT, FROM_FEEDBACK, Judge, Verdict, image_text_verdict
from backend.labels import memory_words
from backend.llm.base import ChatModel
from backend.manager import Manager, memory_to_dict
from backend.methods import Method
from backend.metering import MeteredModel, RunMeter, StopRequested
from backend.planner import Planner
from backend.prompts.manager import (
    IMAGE_TEXT_MAX_CHARS, IMAGE_TEXT_TITLE, LOOKS_LIKE, caption_messages, caption_with_ocr, image_text_passage,
)
from backend.evidence import shares_a_question_word, stating_sentence, without_question_frame
from backend.answer_kind import OPTION, YES_NO, is_of_kind, not_of_kind_answer, says_not_of_kind, span_of_kind, what_it_is
from backend.hops import (Hop, answering_hop, fill, hops_from, restates_its_subject, subjects_of, weakest,
                          worked_examples_shown, yes_no_answer)
from backend.image_gaps import gap_query, image_heading
from backend.follow_up import FollowUpContext
from backend.inputs import InputError
from backend.plan_review import PERSON, PlanDraft, plan_text
from backend.question import Question
from backend.taught import TaughtAnswer, evidence_queries, recall, taught_fields
from backend.tools.base import Tool, offered_tools, tool_names_line
from backend.tools.text_ranking import tokenize
from memory_db.lifecycle import is_verified
from memory_db.provenance import RESEARCH, Provenance, read_provenance

ROLES = ("planner", "executor", "manager", "judge")
DOCUMENT_SOURCE = "doc:"  # the source of a passage of the person's own documents (backend.documents)
DOCUMENT_MATCH = 0.6  # share of a question's content words a document passage holds to be researched first


@dataclass(frozen=True)
class EpisodeSettings:
    """The limits of one episode. `from_config` reads the app's agent and role settings; training
    gives its own (sampling settings are the policy model's, not the loop's)."""

    max_turns: int = 2
    reflections: int = 1
    max_seconds: float = 300.0
    executor_max_new_tokens: int = 96
    planner_max_new_tokens: int = 96
    guided: bool = False
    read_by_quote: bool = False
    follow_links: bool = False  # agent.follow_links
    max_llm_calls: int = 0  # 0 = no limit
    max_tokens: int = 0  # 0 = no limit
    memory_k: int = 2
    min_memory_similarity: float = 0.35
    plan_shape: str = "subquestions"  # "subquestions" | "steps" (backend.hops)
    taught_min_similarity: float = 0.85
    caption_min_similarity: float = 0.92
    image_text_first: bool = False  # an answer the image's own text states is given before any plan (agent.image_text_first)
    sparse_memory_planner: str = "manager"
    summary_max_words: int = 300
    memory_scoring: MemoryConfig = MemoryConfig()  # how memories are ranked ([memory]: the paper's weights)

    @property
    def supplement_turns(self) -> int:
        """Turns after a replan: half the first round's (at least 2); the conversation already holds
        what the first round found, and the supplementary plan has at most 3 steps."""
        return max(2, self.max_turns // 2)

    @classmethod
    def from_config(cls, config, executor_traits) -> EpisodeSettings:
        agent = config.agent
        return cls(
            max_turns=agent.turns_for(executor_traits),
            reflections=agent.reflections,
            max_seconds=agent.max_seconds,
            executor_max_new_tokens=config.role("executor").max_new_tokens,
            planner_max_new_tokens=min(config.role("planner").max_new_tokens, 200),
            guided=agent.guided_for(executor_traits),
            read_by_quote=agent.read_by_quote,
            follow_links=agent.follow_links,
            max_llm_calls=agent.llm_calls_for(executor_traits),
            max_tokens=agent.max_tokens,
            memory_k=agent.memory_k,
            min_memory_similarity=agent.min_memory_similarity,
            plan_shape=agent.plan_shape,
            taught_min_similarity=agent.taught_min_similarity,
            caption_min_similarity=agent.caption_min_similarity,
            image_text_first=agent.image_text_first,
            sparse_memory_planner=agent.sparse_memory_planner,
            summary_max_words=agent.summary_max_words,
            memory_scoring=config.memory,
        )


@dataclass
class EpisodeInput:
    question: str
    namespace: str = "default"
    image: str | None = None
    caption: str | None = None  # given by the user
    ground_truth: str | None = None
    memory_text: str | None = None  # the Planner's memory text as given (training data; for a plan of
    # sub-questions, its worked examples); None = as the method retrieves
    plan_steps: list[str] | None = None  # a given plan (GRPO stage 1; on plan_shape "subquestions" its
    # sub-questions, researched hop by hop); None = the Planner plans if the method plans
    plan_source: str | None = None  # "person" (backend.plan_review.PERSON): `plan_steps` are the person's, researched
    # as written, never pruned, rewritten or supplemented by the Planner; None = the Planner's or training's
    drafted_plan: list[str] | None = None  # a person's plan: the Planner's draft it was made from
    follow_up: FollowUpContext | None = None  # a follow-up: its thread, and the earlier passages its session holds


@dataclass
class EpisodeOutcome:
    """What a finished episode leaves for its caller (the events say the same, in order)."""

    session: ExecutorSession | None = None  # None until the Executor starts
    first_answer: str = ""
    answer: str = ""
    replanned: bool = False
    plans: list[PlanReady] = field(default_factory=list)
    verdict: VerdictReady | None = None
    plan_steps: list[str] = field(default_factory=list)
    first_plan_step_count: int = 0
    taught: TaughtAnswer | None = None  # the person's answer this run started from
    hops: list[Hop] = field(default_factory=list)  # a plan of sub-questions, as researched
    from_image_text: bool = False  # answered from the question's image text before any plan (image_text_first)
    from_thread: bool = False  # a follow-up answered from the passages its thread found before, without a search


def planner_memories(manager: Manager, question: str, namespace: str, caption: str | None,
                     settings: EpisodeSettings) -> tuple[list[dict], list[dict]]:
    """The successful and failed memories shown for a question, retrieved as `settings` say (the app's
    episodes and test-time rollouts alike)."""
    s = settings
    found = manager.retrieve(question, namespace, caption, s.memory_k, min_similarity=s.min_memory_similarity,
                             scoring=s.memory_scoring)
    return ([memory_to_dict(m, s.min_memory_similarity) for m in found.successful],
            [memory_to_dict(m, s.min_memory_similarity) for m in found.failed])


class EpisodeLoop:
    def __init__(
        self,
        *,
        models: Mapping[str, ChatModel],
        tools: Mapping[str, Tool],
        method: Method,
        settings: EpisodeSettings,
        judge=None,
        store=None,
        run_id: str,
        meter: RunMeter | None = None,
        stop_requested: Callable[[], bool] | None = None,
    ) -> None:
        """`models`: a ChatModel per role (backend.episode.ROLES; the manager's only with a store).
        `judge`: grade(question, answer, gold) and evaluate_without_ground_truth(question, answer,
        passages), both given the run's backend.question.Question and returning a backend.judge.Verdict;
        None = the app's Judge on the judge role's
        model (a small one may not call an answer correct that shares no word with the gold one).
        `stop_requested`: polled before every model call; once true the run ends with the answer so far."""
        self.meter = meter or RunMeter()
        self.raw_models = dict(models)
        self.models = {role: MeteredModel(model, self.meter, role, stop_requested) for role, model in models.items()}
        self.tools, self.method, self.settings, self.store = dict(tools), method, settings, store
        if judge is None:
            judge = Judge(self.models["judge"], require_overlap=self.models["judge"].traits.small)
        self.judge = judge
        self.run_id = run_id
        self.outcome: EpisodeOutcome | None = None
        self._image_text = ""  # what OCR read in the question's image
        self._caption_without_text: str | None = None  # the caption before that text was added to it

    # -- steps of the episode -----------------------------------------------------------------
    def _caption(self, episode: EpisodeInput) -> tuple[str | None, str | None]:
        """The image's caption and where it came from, with any text the image shows read by OCR
        (source "...+ocr"; nothing when tesseract is not installed)."""
        caption, source = self._describe(episode)
        if not episode.image:
            return caption, source
        start = time.perf_counter()
        text = read_image_text(episode.image)
        self.meter.add_tool(time.perf_counter() - start)
        if not text:
            return caption, source
        self._image_text = protocol.neutralise(text)
        self._caption_without_text = caption
        return caption_with_ocr(caption, self._image_text), f"{source}+ocr" if source else "ocr"

    def _executor_caption(self, caption: str | None) -> str | None:
        """The caption the Executor's first turn shows: without the image's text, which that turn shows whole."""
        return self._caption_without_text if self._image_text else caption

    def _describe(self, episode: EpisodeInput) -> tuple[str | None, str | None]:
        """The image's caption: the user's, a vision model's, else the best match of a tool that
        captions images when it is at least `caption_min_similarity` alike, said as a claim with its
        source ("looks like: Flag of France (image index, similarity 0.95)"); else none: the question
        is researched from the image's text and the person's words."""
        if episode.caption:
            return episode.caption.strip(), "user"
        if not episode.image:
            return None, None
        vision = next((m for m in self.raw_models.values() if m.supports_images), None)
        if vision is not None:
            completion = vision.generate(caption_messages(episode.image), max_new_tokens=60)
            self.meter.add_llm("captioner", completion.seconds, completion.prompt_tokens, completion.completion_tokens)
            if completion.text.strip():
                return completion.text.strip(), "vision-model"
        captioner = next((t for t in self.tools.values() if t.capabilities.captions_images), None)
        if captioner is not None:
            start = time.perf_counter()
            result = captioner({"image": episode.image})
            self.meter.add_tool(time.perf_counter() - start)
            if result.ok and result.passages and result.passages[0].score >= self.settings.caption_min_similarity:
                best = result.passages[0]
                return LOOKS_LIKE.format(title=best.title, similarity=best.score), "image-search"
        return None, None

    def _retrieve(self, episode: EpisodeInput, manager: Manager | None, caption: str | None) -> tuple[list[dict], list[dict]]:
        s = self.settings
        return planner_memories(manager, episode.question, episode.namespace, caption, s)

    def _first_planner(self, planner: Planner, successful: list[dict], failed: list[dict]) -> Planner:
        """As in the reference: until memory can show k of each, the Manager's model plans."""
        k = self.settings.memory_k
        sparse = len(successful) < k or len(failed) < k
        if (self.method.manager_plans_while_sparse and sparse and self.settings.sparse_memory_planner == "manager"
                and "manager" in self.models):
            return Planner(self.models["manager"], max_new_tokens=planner.max_new_tokens)
        return planner

    def draft_plan(self, episode: EpisodeInput) -> PlanDraft:
        """The plan the Planner would follow for the question, written as a run writes it (after the same
        memories, shown the same way), without researching it: for a person to review and edit
        (backend.plan_review). The run of the edited plan is another episode, given it as `plan_steps`."""
        s, method, question = self.settings, self.method, episode.question
        if not method.plans:
            raise InputError(f"The method {method.name!r} does not plan: research with one that does (mia) to review its plan.")
        planner = Planner(self.models["planner"], max_new_tokens=s.planner_max_new_tokens)
        caption, _ = self._caption(episode)
        asked = Question.parse(question, image_text=self._image_text)
        successful: list[dict] = []
        failed: list[dict] = []
        if method.uses_memory and self.store is not None:
            manager = Manager(self.models["manager"], self.store, summary_max_words=s.summary_max_words)
            successful, failed = self._retrieve(episode, manager, caption)
        first_planner = self._first_planner(planner, successful, failed)
        if s.plan_shape == "subquestions":
            blueprint = first_planner.decompose(asked, worked_examples_shown(successful, failed), caption)
        else:
            run_tools = offered_tools(self.tools, has_image=bool(episode.image), namespace=episode.namespace)
            blueprint = first_planner.plan(question, method.planner_text(successful, failed),
                                           tool_names_line(run_tools.values()), caption)
        return PlanDraft(question, list(blueprint.steps), s.plan_shape, blueprint.recovered,
                         f"{first_planner.model.role}: {first_planner.model.name}",
                         [memory["question"] for memory in successful + failed])

    # -- the loop -----------------------------------------------------------------------------
    def run(self, episode: EpisodeInput) -> Iterator[Event]:
        try:
            yield from self._run(episode)
        except StopRequested:
            yield from self._stopped()

    def _stopped(self) -> Iterator[Event]:
        """The answer so far, marked stopped; a stopped run is not judged and leaves no memory."""
        outcome = self.outcome
        session = outcome.session if outcome is not None else None
        answer = (session.answer or outcome.first_answer) if session is not None else ""
        if session is not None and answer:
            yield AnswerReady(self.run_id, text=answer, forced=True, reason="stopped by the user",
                              sources=session.sources(answer))
        yield RunFinished(self.run_id, answer=answer, stats=self.meter.snapshot(), stopped=True)

    def _run(self, episode: EpisodeInput) -> Iterator[Event]:
        s, method, run_id = self.settings, self.method, self.run_id
        planner = Planner(self.models["planner"], max_new_tokens=s.planner_max_new_tokens)
        manager = (Manager(self.models["manager"], self.store, summary_max_words=s.summary_max_words)
                   if self.store is not None else None)
        deadline = time.monotonic() + s.max_seconds
        caption, caption_source = self._caption(episode)
        # The question is parsed here, once; every role, tool and judge of the run is handed this value.
        question = Question.parse(episode.question, image_text=self._image_text)
        yield RunStarted(run_id, question=question.text, namespace=episode.namespace, image=episode.image,
                         caption=caption, caption_source=caption_source, ground_truth=episode.ground_truth,
                         image_text=question.image_text[:IMAGE_TEXT_MAX_CHARS] or None,
                         follow_up=episode.follow_up.to_dict() if episode.follow_up is not None else None)

        successful: list[dict] = []
        failed: list[dict] = []
        taught = None
        if method.uses_memory and manager is not None and episode.memory_text is None:
            recalled = recall(self.store, question.text, episode.namespace, min_similarity=s.taught_min_similarity,
                              caption=caption)
            # A person's plan is researched as written: an answer taught for the question does not replace it.
            taught = recalled.taught if episode.plan_source != PERSON else None
            successful, failed = self._retrieve(episode, manager, caption)
            yield MemoriesRetrieved(run_id, successful=successful, failed=failed,
                                    taught=taught.to_dict() if taught else None, near_taught=recalled.near_dict())

        run_tools = offered_tools(self.tools, has_image=bool(episode.image), namespace=episode.namespace)
        outcome = self.outcome = EpisodeOutcome(taught=taught)
        from_thread = False
        if taught is None and episode.follow_up is not None and episode.follow_up.passages and episode.plan_steps is None:
            from_thread = yield from self._answer_from_thread(episode, question, caption, run_tools)
        if taught is not None:
            yield from self._from_taught(episode, question, taught, caption, run_tools)
        elif from_thread:
            pass  # answered from what the thread found before: nothing more to research
        else:
            yield from self._research(episode, question, planner, successful, failed, caption, run_tools, deadline)
        if taught is None and not outcome.from_image_text and outcome.session is not None:
            yield from self._of_the_kind_asked(question, deadline)
        answer = outcome.answer

        if episode.ground_truth:
            verdict = self.judge.grade(question, answer, episode.ground_truth)
        elif taught is not None:
            verdict = Verdict(CORRECT, taught.evidence_words, [taught.told], source=FROM_FEEDBACK)
        elif outcome.from_image_text:
            verdict = image_text_verdict(IMAGE_TEXT_TITLE)
        else:
            verdict = self.judge.evaluate_without_ground_truth(question, answer, outcome.session.passages)
        yield from self._finish(episode, question, outcome, verdict, manager, caption, successful + failed)

    def _of_the_kind_asked(self, question: Question, deadline: float) -> Iterator[Event]:
        """An answer of another kind than the question asks for (backend.answer_kind: "Pennsylvania", a
        state, for "In which country ...?") is not given as the answer. The place it names is searched
        once more (its page names the country it is in), the answer is read again, told that it is not
        that one, and where the reading is still of another kind, a name of the kind asked that a
        retrieved sentence gives beside the first answer is taken ("... a state in the United States").
        When none is found, the answer says what was found and that it is not what was asked."""
        outcome = self.outcome
        session, answer = outcome.session, outcome.answer
        kind = question.kind
        if kind is None or not answer.strip() or is_of_kind(kind, answer) or says_not_of_kind(answer):
            return
        found = what_it_is(answer) or "an answer of another kind"
        yield Recovery(self.run_id, turn=session.turn_count, reason=f"{answer!r} is {found}; the question asks for "
                       f"{not_of_kind_answer(kind, answer).rsplit('; not ', 1)[1]}",
                       action="searching it once more and reading the answer again")
        search = session.search_tool()
        if (search is not None and what_it_is(answer) is not None and not session.limit_reached(deadline)
                and answer.casefold() not in session.searched_queries()):
            yield from session.search(search.name, answer)
        again = ""
        if kind.name not in (OPTION, YES_NO) and not session.limit_reached(deadline):
            again = yield from session.read_again(question, not_this=answer)
        if again and is_of_kind(kind, again) and stating_sentence(again, question.text, session.passages):
            better, how = again, f"read again: {again!r}"
        else:
            beside = [(span, f"{title}: {sentence}") for title, sentence in session.sentences_naming(answer)
                      if (span := span_of_kind(kind, sentence))]
            better = beside[0][0] if beside else None
            how = (f"{better!r}, which a retrieved sentence gives beside {answer!r}" if better
                   else "nothing of that kind found: the answer says so")
            if better:
                session.add_derived_hop(f"Which {kind.name} is {answer} in?", better, beside[0][1])
            better = better or not_of_kind_answer(kind, answer)
        yield Recovery(self.run_id, turn=session.turn_count, reason=f"the answer must be {kind.name}", action=how)
        yield session.answer_with(better)
        yield from session.report_steps()
        outcome.answer = better

    def _research(self, episode: EpisodeInput, question: Question, planner: Planner, successful: list[dict],
                  failed: list[dict], caption: str | None, run_tools: dict, deadline: float) -> Iterator[Event]:
        """Plan, execute, reflect and replan: the answer goes to `self.outcome`."""
        s, method, run_id, outcome = self.settings, self.method, self.run_id, self.outcome
        if s.image_text_first and method.plans and question.image_text and episode.plan_steps is None:
            answered = yield from self._answer_from_image_text(episode, question, caption, run_tools)
            if answered:
                return
        if s.plan_shape == "subquestions" and (method.plans or episode.plan_steps is not None):
            yield from self._research_by_hops(episode, question, planner, successful, failed, caption, run_tools, deadline)
            return
        steps_done: list[str] = []
        if episode.plan_steps is not None:
            steps_done = list(episode.plan_steps)
            if episode.plan_source == PERSON:
                yield self._person_plan(episode)
        elif method.plans:
            first_planner = self._first_planner(planner, successful, failed)
            memories_text = episode.memory_text if episode.memory_text is not None else method.planner_text(successful, failed)
            tools_text = tool_names_line(run_tools.values())
            blueprint = first_planner.plan(question.text, memories_text, tools_text, caption)
            plan = PlanReady(run_id, text=blueprint.text, steps=blueprint.steps, recovered=blueprint.recovered,
                             planner_model=f"{first_planner.model.role}: {first_planner.model.name}")
            outcome.plans.append(plan)
            yield plan
            steps_done = list(blueprint.steps)
        outcome.first_plan_step_count = len(steps_done)

        session = outcome.session = self._session(episode, question, run_tools)
        session.start(question, steps_done, self._executor_caption(caption), context=method.executor_notes(successful, failed))
        yield from session.run(question, max_turns=s.max_turns, deadline=deadline)
        outcome.first_answer = session.answer

        # A person's plan of steps is not supplemented by the Planner's.
        for round_no in range(1, (s.reflections if method.reflects and episode.plan_source != PERSON else 0) + 1):
            if session.limit_reached(deadline):
                break
            reflection = planner.reflect(question.text, session.answer, session.trace_text(),
                                         support=session.answer_support(question))
            yield ReflectionDecided(run_id, replan=reflection.replan, scores=reflection.scores, round=round_no)
            if not reflection.replan:
                break
            outcome.replanned = True
            supplement = planner.replan(question.text, session.answer, session.trace_text(), steps_done)
            plan = PlanReady(run_id, text=supplement.text, steps=supplement.steps, revision=round_no,
                             recovered=supplement.recovered, planner_model=f"planner: {planner.model.name}")
            outcome.plans.append(plan)
            yield plan
            steps_done.extend(supplement.steps)
            session.add_supplementary_plan(supplement.steps)
            yield from session.run(question, max_turns=s.supplement_turns, deadline=deadline)
            yield from session.settle_after_replan()
        outcome.plan_steps = steps_done
        outcome.answer = session.answer

    def _answer_from_image_text(self, episode: EpisodeInput, question: Question, caption: str | None,
                                run_tools: dict) -> Generator[Event, None, bool]:
        """agent.image_text_first: before any plan, read the answer from the question's image text alone.
        When that text states it, and it repeats no word of the question (a first hop's entity would;
        the question's own frame around the span, "Until" or "per tonne", is taken off first), the run
        answers with it, cited to the image, without a plan or a search; returns whether it did.
        An image whose text leaves a search to do (backend.image_gaps: a comparison's other option, the
        bridge its heading names) holds part of the answer at most: it is researched."""
        outcome = self.outcome
        if gap_query(question, image_heading(question.image_text), [], set()) is not None:
            return False
        session = self._session(episode, question, run_tools)
        session.start(question, [], self._executor_caption(caption))
        draft = without_question_frame((yield from session.read_answer(question, draft=True)), question.text)
        if not draft or shares_a_question_word(draft, question.text) or not session.image_states(draft, question):
            return False
        yield Recovery(self.run_id, turn=session.turn_count, reason="the text in the question's image states an answer",
                       action="answered from it, without a plan or a search", routine=True)
        outcome.session, outcome.from_image_text = session, True
        yield session.answer_with(draft)
        yield from session.report_steps()
        outcome.first_answer = outcome.answer = draft
        return True

    def _answer_from_thread(self, episode: EpisodeInput, question: Question, caption: str | None,
                            run_tools: dict) -> Generator[Event, None, bool]:
        """A follow-up, before any plan: its answer read from the passages its thread found before (its
        session holds them). When a sentence of theirs states the answer, and it is not what the question
        itself names, the run answers with it, cited, without a search; returns whether it did. Otherwise
        it says so and the question is researched as usual, those passages still in its session."""
        outcome = self.outcome
        session = self._session(episode, question, run_tools)
        session.start(question, [], self._executor_caption(caption))
        answer = yield from session.read_answer(question)
        reused = episode.follow_up.passages
        stated = bool(answer) and not restates_its_subject(answer, question) and bool(
            stating_sentence(answer, question.text, reused))
        if not stated:
            yield Recovery(self.run_id, turn=session.turn_count, routine=True,
                           reason=f"no passage the thread found before states an answer ({answer!r} read)",
                           action="researching the follow-up with those passages kept in view")
            return False
        yield Recovery(self.run_id, turn=session.turn_count, routine=True,
                       reason="a passage the thread found before states the answer",
                       action="answered from it, without a new search")
        outcome.session, outcome.from_thread = session, True
        yield session.answer_with(answer)
        yield from session.report_steps()
        outcome.first_answer = outcome.answer = answer
        return True

    def _person_plan(self, episode: EpisodeInput) -> PlanReady:
        """The event of a plan the person reviewed: researched as written."""
        steps = list(episode.plan_steps or [])
        plan = PlanReady(self.run_id, text=plan_text(steps), steps=steps, planner_model="the person",
                         source=PERSON, drafted=list(episode.drafted_plan) if episode.drafted_plan is not None else None)
        self.outcome.plans.append(plan)
        return plan

    def _research_by_hops(self, episode: EpisodeInput, question: Question, planner: Planner, successful: list[dict],
                          failed: list[dict], caption: str | None, run_tools: dict, deadline: float) -> Iterator[Event]:
        """A plan of sub-questions (backend.hops): each hop researched and read on its own, earlier
        answers filled into later hops; reflection checks each hop's answer against a retrieved sentence
        and a replan redoes the first hop no sentence states, and the hops after it. The answer is the
        answering hop's (backend.hops.answering_hop: the last one built on an earlier answer, unless it is
        a side check); a yes/no question whose hops each ask yes or no is answered from them
        (backend.hops.yes_no_answer); otherwise it is read for the question from every hop's results.
        A plan of one sub-question is researched by the Executor's own turns for the question
        (ExecutorSession.research_as_question), with no replan."""
        s, run_id, outcome = self.settings, self.run_id, self.outcome
        worked = ""
        in_document = self._document_stating(question.text, run_tools) if episode.plan_steps is None else None
        if episode.plan_steps is not None:  # a given decomposition (GRPO stage 1, a person's plan): its hops as written
            subquestions = list(episode.plan_steps)
            if episode.plan_source == PERSON:
                yield self._person_plan(episode)
        elif in_document is not None:
            plan = PlanReady(run_id, text=f"1. {question.text}", steps=[question.text], planner_model="",
                             chosen=f"one of your documents matches the question ({in_document}): researched as one "
                                    "hop first, without the Planner")
            outcome.plans.append(plan)
            yield plan
            subquestions = [question.text]
        else:
            first_planner = self._first_planner(planner, successful, failed)
            worked = (episode.memory_text if episode.memory_text is not None
                      else worked_examples_shown(successful, failed))
            blueprint = first_planner.decompose(question, worked, caption)
            plan = PlanReady(run_id, text=blueprint.text, steps=blueprint.steps, recovered=blueprint.recovered,
                             planner_model=f"{first_planner.model.role}: {first_planner.model.name}")
            outcome.plans.append(plan)
            yield plan
            subquestions = blueprint.steps
        outcome.first_plan_step_count = len(subquestions)
        session = outcome.session = self._session(episode, question, run_tools)
        hops = outcome.hops = hops_from(subquestions, question)
        # A person's single sub-question that is not the question itself is what they chose to ask: it is
        # researched as a hop, and the question read over what it found.
        one_hop = len(hops) == 1 and (episode.plan_source != PERSON or hops[0].template.strip() == question.text.strip())
        # A single hop is not shown to the Executor's turns: the small model copies a plan step into its
        # query (on `train`: "Who is the fictional MI6 agent created by Ian Fleming in 1952?" where the
        # Executor alone searched "Ian Fleming").
        session.start(question, [] if one_hop else subquestions, self._executor_caption(caption),
                      context=self.method.executor_notes(successful, failed))
        if one_hop:
            yield from session.research_as_question(hops[0], question, max_turns=s.max_turns, deadline=deadline)
            outcome.first_answer = outcome.answer = session.answer
            outcome.plan_steps = [hops[0].template]
            if (in_document is not None and self.method.reflects and s.reflections and not hops[0].stated
                    and not question.closed and not session.limit_reached(deadline)):
                yield from self._decompose_unstated(session, planner, question, worked, caption, deadline)
            return
        yield from self._research_hops(session, hops, deadline)
        for round_no in range(1, (s.reflections if self.method.reflects else 0) + 1):
            weak = weakest(hops)
            if weak is None or session.limit_reached(deadline):
                break
            yield ReflectionDecided(run_id, replan=True, round=round_no)
            outcome.replanned = True
            redo = hops[weak.number - 1:]
            yield PlanReady(run_id, text=f"Redo from hop {weak.number}: no retrieved sentence states its answer.",
                            steps=[hop.template for hop in redo], revision=round_no,
                            planner_model=f"planner: {planner.model.name}")
            yield from self._research_hops(session, redo, deadline, other_queries=question.names)
        closed = question.closed
        answering = None if closed else answering_hop(hops, question)
        answer = answering.answer if answering is not None else (yes_no_answer(hops, question) or "")
        if not answer:
            answer = yield from session.read_answer(question)
        outcome.first_answer = outcome.first_answer or answer
        yield session.answer_with(answer)
        yield from session.report_steps()
        outcome.plan_steps = [hop.template for hop in hops]
        outcome.answer = answer

    def _document_stating(self, question: str, run_tools: dict) -> str | None:
        """The title of a passage of the person's own documents that most of the question's words stand
        in (DOCUMENT_MATCH of its content words), found by one search of the question; None without
        documents or such a passage. Its answer is then researched as one hop first: planned by the
        Planner, a one-hop document question had become two hops and 15 model calls."""
        search = next((t for t in run_tools.values() if t.capabilities.reads_documents and t.capabilities.query_argument),
                      None)
        wanted = set(tokenize([question])[0])
        if search is None or not wanted:
            return None
        start = time.perf_counter()
        result = search({search.capabilities.query_argument: [question]})
        self.meter.add_tool(time.perf_counter() - start)
        for passage in result.passages if result.ok else []:
            if not (passage.source or "").startswith(DOCUMENT_SOURCE):
                continue
            held = wanted & set(tokenize([f"{passage.title} {passage.text}"])[0])
            if len(held) >= DOCUMENT_MATCH * len(wanted):
                return passage.title
        return None

    def _decompose_unstated(self, session: ExecutorSession, planner: Planner, question: Question, worked: str,
                            caption: str | None, deadline: float) -> Iterator[Event]:
        """The reflection of the one hop researched first for a question one of the person's documents
        matches (_document_stating). Its answer is stated by no retrieved text (nothing found holds it,
        or it is what the question names), so the Planner is asked for sub-questions, told so; when it
        writes two or more, they are researched hop by hop in the same session, and an answer a
        retrieved text states replaces the first one."""
        outcome, first = self.outcome, session.answer
        yield ReflectionDecided(self.run_id, replan=True, round=1)
        blueprint = planner.decompose(question, worked, caption, unstated=first)
        if len(blueprint.steps) < 2:
            yield Recovery(self.run_id, turn=session.turn_count, reason="no retrieved text states the answer",
                           action=f"the Planner wrote no sub-questions again; {first!r} stands")
            return
        outcome.replanned = True
        yield PlanReady(self.run_id, text=blueprint.text, steps=blueprint.steps, revision=1,
                        recovered=blueprint.recovered, planner_model=f"planner: {planner.model.name}")
        one_hop = outcome.hops
        hops = outcome.hops = hops_from(blueprint.steps, question)
        yield from self._research_hops(session, hops, deadline)
        answering = answering_hop(hops, question)
        answer = answering.answer if answering is not None else (yield from session.read_answer(question))
        if not answer or answer == first or not stating_sentence(answer, question.text, session.passages):
            outcome.hops = one_hop
            yield Recovery(self.run_id, turn=session.turn_count, reason="the sub-questions found no stated answer",
                           action=f"{first!r} stands")
            return
        yield session.answer_with(answer)
        yield from session.report_steps()
        outcome.plan_steps = [hop.template for hop in hops]
        outcome.answer = answer

    def _research_hops(self, session: ExecutorSession, hops: list[Hop], deadline: float,
                       other_queries: tuple[str, ...] = ()) -> Iterator[Event]:
        answers = [hop.answer for hop in self.outcome.hops]
        for hop in hops:
            if session.limit_reached(deadline):
                break
            hop.question = fill(hop.template, answers[:hop.number - 1])
            yield from session.research_hop(hop, other_queries=other_queries,
                                            subjects=tuple(subjects_of(hop.template, answers[:hop.number - 1])))
            answers[hop.number - 1] = hop.answer

    def _session(self, episode: EpisodeInput, question: Question, run_tools: dict) -> ExecutorSession:
        """The Executor's session; the text OCR read in the question's image is evidence in it, a
        passage an answer can rest on and cite, as the search results are."""
        s = self.settings
        session = ExecutorSession(
            self.models["executor"], run_tools, self.meter, self.run_id, max_new_tokens=s.executor_max_new_tokens,
            image=episode.image, max_llm_calls=s.max_llm_calls, max_tokens=s.max_tokens, guided=s.guided,
            read_by_quote=s.read_by_quote, follow_links=s.follow_links,
        )
        if question.image_text:
            session.passages.append(image_text_passage(question.image_text))
            session.image_heading = image_heading(question.image_text)
        if episode.follow_up is not None and episode.follow_up.passages:
            session.reuse(episode.follow_up.passages)
        return session

    def _from_taught(self, episode: EpisodeInput, question: Question, taught: TaughtAnswer, caption: str | None,
                     run_tools: dict) -> Iterator[Event]:
        """Answer with a person's answer at once: search for it beside the question's names and cite
        the source where a retrieved sentence states it; where none does, it is given as the person's
        word (AnswerReady.taught["confirmed"] False). No model is called either way: researching the
        question again took a minute and set answers about other things beside the person's."""
        outcome = self.outcome
        session = outcome.session = self._session(episode, question, run_tools)
        session.start(question, [], self._executor_caption(caption))
        search = session.search_tool()
        found = False
        for query in evidence_queries(question, taught.answer, taught.evidence) if search is not None else []:
            yield from session.search(search.name, query)
            # A sentence stating it about what the question asks (a comparison's answer no one sentence states).
            found = not question.closed and bool(session.sources(taught.answer))
            if found:
                break
        yield session.answer_with(taught.answer, taught={**taught.to_dict(), "confirmed": bool(found)})
        yield from session.report_steps()
        outcome.answer = taught.answer

    def _finish(self, episode: EpisodeInput, question: Question, outcome: EpisodeOutcome, verdict: Verdict,
                manager: Manager | None, caption: str | None, shown: list[dict]) -> Iterator[Event]:
        run_id, answer = self.run_id, outcome.answer
        outcome.verdict = VerdictReady(
            run_id, label=verdict.label, method=verdict.method, ground_truth=episode.ground_truth,
            feedback=verdict.feedback, source=verdict.source, confidence=verdict.confidence,
            evidence=verdict.evidence, leaning=verdict.leaning,
        )
        yield outcome.verdict

        used_ids = [m["id"] for m in shown]
        if outcome.taught is not None:
            used_ids.append(outcome.taught.memory_id)
        if self.store is not None and used_ids and verdict.verified:
            # Win rates count verified outcomes: the Judge's own opinion can be steered by what the
            # run read. A memory may have been evicted or deleted while this run used it.
            self.store.record_outcome(used_ids, correct=verdict.correct, namespace=episode.namespace, missing_ok=True)

        if self.method.uses_memory and manager is not None:
            yield self._consolidate(manager, episode, question, caption, outcome, verdict, used_ids)
        yield RunFinished(run_id, answer=answer, stats=self.meter.snapshot())

    @staticmethod
    def _follow_up_fields(episode: EpisodeInput) -> dict:
        """What a memory records of the run's steering: the Planner's draft a person's plan was made from,
        and for a follow-up, its thread and the question as the person typed it."""
        fields = {}
        if episode.plan_source == PERSON and episode.drafted_plan is not None:
            fields["planner_draft"] = list(episode.drafted_plan)
        if episode.follow_up is not None:
            fields["follow_up"] = {key: value for key, value in episode.follow_up.to_dict().items() if key != "reused"}
        return fields

    def _consolidate(self, manager: Manager, episode: EpisodeInput, question: Question, caption, outcome: EpisodeOutcome,
                     verdict, used_ids: list[str]) -> MemoryStored:
        session, answer = outcome.session, outcome.answer
        consolidation = manager.consolidate(
            question=question,
            caption=caption,
            plan_steps=outcome.plan_steps,
            steps=session.steps,
            passages=session.passages,
            support=session.answer_support(question),
            answer=answer,
            verdict=verdict.label,
            namespace=episode.namespace,
            compress=self.method.compress,
            provenance=Provenance(
                origin=RESEARCH, run_id=self.run_id, method=self.method.name,
                models={role: m.name for role, m in self.raw_models.items()},
                judge_verdict=verdict.label, judge_method=verdict.method, judge_feedback=verdict.feedback,
                judge_confidence=verdict.confidence, verified=verdict.verified, verdict_source=verdict.source,
                ground_truth=episode.ground_truth, answer=answer, first_answer=outcome.first_answer,
                memories_used=used_ids,
                sources=[c.get("url") or c["title"] for c in session.sources(answer)],
                searched=sorted({p.get("url") or p["title"] for p in session.passages}),
                trajectory=f"{session.trace_text(max_chars=3000)}\nAnswer: {answer}",
                decomposition=[hop.to_dict() for hop in outcome.hops] or None,
                plan_source=episode.plan_source or "",
                **(taught_fields(answer=outcome.taught.answer, user=outcome.taught.by, at=outcome.taught.at,
                                 how=outcome.taught.how, evidence=outcome.taught.evidence) if outcome.taught else {}),
                **self._follow_up_fields(episode),
            ),
        )
        memory = consolidation.memory
        stored_by = read_provenance(memory.provenance).run_id
        return MemoryStored(self.run_id, memory_id=memory.id, summary=memory.summary, correct=memory.correct,
                            question_type=memory.question_type, summary_source=consolidation.summary_source,
                            verified=is_verified(memory), label=memory_words(memory),
                            kept_from=stored_by if stored_by and stored_by != self.run_id else None)
