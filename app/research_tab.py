"""The research view: ask (Enter or Research), see the answer first (marked working… until the run
is final) with numbered sources; a source opens beside the answer with its cited sentence
highlighted (a document's page from the caller's own documents, a PDF page as an image with the
sentence marked: app/source_view.py), and can be struck as wrong, undone, and the question
re-answered without it. The trace below the answer, one line per step, then feedback; stop a run,
download its report (Markdown, PDF, JSON), reopen past runs. A run whose page closes finishes in the
background, into History."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import closing
from datetime import datetime

import gradio as gr

from app.escaping import escape_markdown
from app.render_html import TranscriptPage, transcript_of
from app.report import write_report_files
from app.research_assets import KEEP_OPEN_JS, RESEARCH_CSS
from app.report_pdf import write_report_pdf
from app.source_view import SOURCE_CSS, SourceView, open_citation, open_locator, page_images
from app.session import RUNS_AT_ONCE, AppContext, ReadOnlyModeError
from app.steering import (REVIEW_LABEL, PerPage, attach_thread, build_follow_up_box, build_plan_editor, checked_steering,
                          draft_for_review, drafting_box, editor_shown, follow_up_steering, own_wording_steering,
                          require_steering, review_wanted, steered, steering_key, steering_left, thread_of_logged)
from app.transcript import RunLimits, RunTranscript
from backend.agent import RunRequest
from backend.events import RunFinished, TextDelta
from backend.feedback_queue import FeedbackItem
from backend.feedback import FeedbackError, submit_feedback
from backend.judge import Judge
from backend.llm.base import LLMError
from backend.tools.base import offered_tools, query_tool
from app.memory_view import SCAN_LIMIT
from backend.labels import is_runs_own, run_words
from memory_db import MemoryNotFoundError, MemoryStoreError, UnreadableMemoryError
from memory_db.provenance import read_provenance

log = logging.getLogger(__name__)

EXAMPLE_QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
# Three kinds of question the sandbox wiki can answer: a comparison, a bridge, a yes/no.
EXAMPLE_QUESTIONS = [
    EXAMPLE_QUESTION,
    "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?",
    "Were H. G. Wells and Rubén Darío both English?",
]
HISTORY_COLUMNS = ["run id", "started", "question", "answer", "verdict"]


READ_ONLY_HISTORY = "⚠️ The read-only demo keeps no runs: its visitors share one namespace."


def person_verdicts(ctx: AppContext, namespace: str) -> dict[str, FeedbackItem]:
    """Per run, the latest feedback that carries a person's verdict (thumbs or a right answer)."""
    latest: dict[str, FeedbackItem] = {}
    for item in ctx.queue.items(namespace, skip_damaged=True):
        if item.thumbs is not None or item.right_answer is not None:
            latest[item.run_id] = item
    return latest


UNDER_WAY = "under way"
INTERRUPTED = "interrupted: the app stopped before the run finished"


def own_memories(ctx: AppContext, namespace: str) -> dict:
    """The memories of `namespace` by the run that stored them (a run's own memory, whose label is the run's)."""
    memories = ctx.runtime.store.list(namespace=namespace, limit=SCAN_LIMIT)
    return {run_id: m for m in memories if (run_id := read_provenance(m.provenance).run_id)}


def own_memory(ctx: AppContext, namespace: str, transcript: RunTranscript):
    """The memory the run stored, as stored now, when it is the run's own (None: no memory, deleted, or an
    earlier run's memory this run was counted on)."""
    if transcript.memory_id is None:
        return None
    try:
        memory = ctx.runtime.store.get(transcript.memory_id, namespace=namespace)
    except (MemoryNotFoundError, UnreadableMemoryError):
        return None
    return memory if is_runs_own(memory, transcript.run_id or "") else None


def history_rows(ctx: AppContext, namespace: str) -> list[list]:
    """Past runs, newest first, a thread of follow-ups as one entry (its latest run, under its first
    question); the verdict is a person's when feedback gave one (the run log keeps the Judge's). A run
    whose log has no end is under way in this app, or was interrupted."""
    if ctx.read_only:  # its runs are not logged; older runs of the shared namespace are no visitor's
        return []
    people = person_verdicts(ctx, namespace)
    own = own_memories(ctx, namespace)
    threads: dict[str, list] = {}  # newest first, each thread's runs newest first
    for r in ctx.runtime.runlog.list_runs(namespace, limit=100):
        threads.setdefault(r.thread or r.run_id, []).append(r)
    rows = []
    for thread, runs in threads.items():
        r, first = runs[0], runs[-1]
        ended = bool(r.verdict)  # a run that ends has a verdict, or says it failed or was stopped
        under_way = not ended and r.run_id in ctx.runs_under_way
        verdict = r.verdict if ended else UNDER_WAY if under_way else INTERRUPTED
        if ended and (r.run_id in own or r.run_id in people):  # in the words the trace, report and Memory use
            verdict = run_words(None, people.get(r.run_id), own.get(r.run_id)) or verdict
        answer = r.answer or ("(not yet)" if under_way else "(no answer)")
        question = first.question
        follow_ups = sum(1 for run in runs if run.thread)
        if follow_ups:
            question += (f" (+{follow_ups} follow-up{'s' if follow_ups != 1 else ''}, the latest: "
                         f"{r.asked or r.question})")
        rows.append([r.run_id, datetime.fromtimestamp(first.started).strftime("%Y-%m-%d %H:%M"), question,
                     answer, verdict])
    return rows


NOT_RUNNING_SENTENCE = "Test-time learning is not running yet"


def search_status(ctx: AppContext) -> str:
    tool = ctx.runtime.agent.tools.get("search")
    index = getattr(tool, "index", None)
    return f"Search: {escape_markdown(index.search_mode())}." if index is not None else ""


def learning_state_line(ctx: AppContext, namespace: str | None = None) -> str:
    """One sentence on what test-time learning does with feedback right now; with `namespace`, the
    signals counted are that namespace's only (a user with logins sees no one else's)."""
    learner = ctx.learner
    if learner is None and ctx.runtime.config.ttrl.enabled:
        why = (ctx.learning_off_reason or "it was started without its learner").rstrip(". ")
        return f"Queued; test-time learning is not running in this app ({why}): see Learning."
    if learner is None:
        return "Test-time learning is switched off (ttrl.enabled = false in mia.toml); the feedback stays queued."
    status = learner.status()
    pending = learner.pending_count(namespace)
    signals = f"{pending} signal{'s' if pending != 1 else ''} pending"
    version = f"current version v{status.current_version:04d}"
    if not status.enabled:
        return f"Test-time learning is switched off in its settings; {signals} stay queued ({version})."
    if not learner.running:  # disabled, failed or killed: as the Learning view tells it
        return f"Queued ({signals}); the learner is not running: see Learning ({version})."
    if status.paused:
        return (f"Test-time learning is paused (an admin can resume it in the Learning view): {signals}; "
                f"the Planner learns from them once it resumes ({version}).")
    return (f"Test-time learning is on: {signals}; the Planner learns from this in the background ({version}).")


def feedback_changes(ctx: AppContext, changes: list[str], *, thumbs: str | None, right_answer: str,
                     namespace: str | None = None) -> list[str]:
    """submit_feedback's sentences, with its placeholder about learning replaced by the learner's real state."""
    lines = []
    for line in changes:
        cut = line.find(NOT_RUNNING_SENTENCE)
        if cut >= 0:
            line = line[:cut].rstrip()
        if line:
            lines.append(line)
    if not thumbs and not (right_answer or "").strip():
        lines.append("A comment alone gives test-time learning nothing to learn from (give a thumbs or the right "
                     "answer for that); it stays in the queue for people to read.")
    else:
        lines.append(learning_state_line(ctx, namespace))
    return lines


def queue_for_learning(ctx: AppContext, transcript: RunTranscript, question: str, namespace: str, *,
                       finished: bool, ground_truth: str | None, image: str | None) -> str | None:
    """A finished run as a learning signal: with a right answer typed beside the question, a
    ground-truth signal; without one, an unsupervised signal when that is opted into (ttrl.unsupervised).

    Returns a sentence for the trace when the question was queued, else None. Runs with an image are
    skipped: the learner's rollouts see only the question's text.
    """
    if (ctx.learner is None or ctx.read_only or not finished or image or not transcript.run_id
            or not transcript.answer.strip() or not question.strip()):
        return None
    gold = (ground_truth or "").strip()
    if not gold and not ctx.runtime.config.ttrl.unsupervised:
        return None
    from training.ttrl.signals import Signal, SignalError

    kind = "ground_truth" if gold else "unsupervised"
    source = f"{kind}:{transcript.run_id}"
    try:
        signal = Signal(question.strip(), kind, namespace, gold, source)
        ctx.queue.add_signal(source[:64], namespace=namespace, run_id=transcript.run_id, signal=signal.to_dict())
    except (SignalError, MemoryStoreError) as exc:
        log.warning("run %s not queued for test-time learning: %s", transcript.run_id, exc)
        return None
    ctx.learner.wake()
    pending = ctx.learner.pending_count(namespace)
    how = "against your right answer" if gold else "by the Judge's evaluators (unsupervised)"
    waiting = "" if ctx.learner.running else "; the learner is not running: see Learning"
    return (f"Queued for test-time learning: the Planner's rollouts on this question are graded {how}; "
            f"{pending} signal{'s' if pending != 1 else ''} pending{waiting}.")


def _with_thumbs(give_feedback, thumbs: str | None):
    def handler(current_run: str | None, answer: str, note: str, request: gr.Request) -> str:
        return give_feedback(thumbs, current_run, answer, note, request)

    return handler


def run_limits(ctx: AppContext) -> RunLimits:
    """The limits a run starts with (the Executor's traits may change with Settings)."""
    return RunLimits.of(ctx.runtime.config.agent, ctx.runtime.agent.models["executor"].traits)


class ActiveRuns:
    """The run each page (Gradio session) has under way, with its Stop switch: a page runs one
    question at a time, and Stop ends that page's run only."""

    def __init__(self) -> None:
        self._runs: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def begin(self, session: str) -> threading.Event | None:
        """A fresh Stop switch for the page's new run; None when the page has one under way."""
        with self._lock:
            if session in self._runs:
                return None
            stop = self._runs[session] = threading.Event()
            return stop

    def end(self, session: str, stop: threading.Event) -> None:
        with self._lock:
            if self._runs.get(session) is stop:
                del self._runs[session]

    def stop(self, session: str) -> bool:
        with self._lock:
            stop = self._runs.get(session)
        if stop is None:
            return False
        stop.set()
        return True

    def running(self, session: str) -> bool:
        with self._lock:
            return session in self._runs


class ShownRuns:
    """The run each page (Gradio session) shows, so that a citation clicked on it opens from the
    server's own copy of the run, live or reopened; the oldest pages are forgotten first."""

    def __init__(self, size: int = 256) -> None:
        self._runs: OrderedDict[str, RunTranscript] = OrderedDict()
        self._lock = threading.Lock()
        self._size = size

    def show(self, session: str, transcript: RunTranscript) -> None:
        with self._lock:
            self._runs[session] = transcript
            self._runs.move_to_end(session)
            while len(self._runs) > self._size:
                self._runs.popitem(last=False)

    def get(self, session: str, run_id: str) -> RunTranscript | None:
        with self._lock:
            transcript = self._runs.get(session)
        return transcript if transcript is not None and transcript.run_id == run_id else None


DELTA_INTERVAL_S = 0.3  # streamed text updates the page at most this often
STOP_NOTE = "Stopping: the run ends before its next model call, with the answer so far."


class QuestionRun:
    """One question run for a page: the agent's events folded into a transcript, the run marked
    under way in this app while it goes, a finished run queued for test-time learning. When the page
    goes away mid-run, `finish_in_background` lets the run end in a thread, into the run log, so
    History shows it with its answer and verdict."""

    def __init__(self, ctx: AppContext, request: RunRequest, stop: threading.Event) -> None:
        self.ctx, self.request, self.stop = ctx, request, stop
        self.transcript = TranscriptPage()
        self.finished = False
        self.ended = threading.Event()  # set once the run is over, on the page or in the background
        self._events = ctx.agent.run(request, stop_requested=stop.is_set)

    def take(self, event) -> None:
        self.transcript.add(event)
        self.ctx.runs_under_way.add(event.run_id)
        self.finished = self.finished or isinstance(event, RunFinished)

    def follow(self) -> Iterator[TranscriptPage]:
        """The transcript after each event (streamed text at most every DELTA_INTERVAL_S); the
        learner gives way meanwhile. Closed early (the page went away), the run goes on in the background."""
        shown_at = 0.0
        try:
            with self.ctx.question_running() as still_running:
                for event in self._events:
                    still_running()
                    self.take(event)
                    if isinstance(event, TextDelta) and time.monotonic() - shown_at < DELTA_INTERVAL_S:
                        continue
                    shown_at = time.monotonic()
                    yield self.transcript
        except GeneratorExit:
            self.finish_in_background()
            raise
        except Exception:
            self.end()
            raise
        self.end()

    def finish_in_background(self) -> None:
        """The page closed mid-run: the run goes on in a thread. Beyond RUNS_AT_ONCE such runs at once
        it is stopped instead (it ends at its next model call, with the answer so far)."""
        slot = self.ctx.background_runs.acquire(blocking=False)
        if not slot:
            self.stop.set()
        threading.Thread(target=self._finish, args=(slot,), name="finish-closed-page-run", daemon=True).start()

    def _finish(self, slot: bool) -> None:
        try:
            with self.ctx.question_running() as still_running:
                for event in self._events:
                    still_running()
                    self.take(event)
        except Exception:  # the agent reports its own errors as events; this is a last guard
            log.exception("run %s failed after its page closed", self.transcript.run_id)
        finally:
            if slot:
                self.ctx.background_runs.release()
            self.end()

    def end(self) -> None:
        """The run is over: queued for learning when it qualifies, no longer under way."""
        try:
            queued = queue_for_learning(self.ctx, self.transcript, self.request.question, self.request.namespace,
                                        finished=self.finished, ground_truth=self.request.ground_truth,
                                        image=self.request.image)
            if queued:
                self.transcript.note(queued, "🎓")
        finally:
            self.ctx.runs_under_way.discard(self.transcript.run_id)
            self.ended.set()


SOURCE_HELP = "<p>A source an answer cites opens here, its cited sentence highlighted.</p>"
STRUCK_NOTE = "You struck this source as wrong: it is not retrieved for your questions until you undo the strike."


def _session(request: gr.Request | None) -> str:
    return str(getattr(request, "session_hash", None) or "no-session")


def report_downloads(ctx: AppContext, transcript: RunTranscript, user: str, namespace: str | None = None):
    """The run's Markdown report, PDF report and JSON, written for `user` alone; DownloadButton
    updates. With `namespace` (the caller's), the PDF shows each cited page of their own PDFs."""
    hidden = (gr.DownloadButton(visible=False),) * 3
    if transcript.started is None:  # a refused question has nothing to report
        return hidden
    try:
        folder = ctx.files.new_folder(user)
        # A follow-up's thread is one report: its first question, then each follow-up.
        first, *follow_ups = [*transcript.earlier, transcript.events]
        feedback = None if follow_ups else transcript.feedback
        md_path, json_path = write_report_files(first, folder, feedback=feedback, follow_ups=follow_ups,
                                                memory=None if follow_ups else transcript.memory)
        images = page_images(ctx, namespace, [first, *follow_ups]) if namespace is not None else {}
        pdf_path = write_report_pdf(first, folder, feedback=feedback, follow_ups=follow_ups, page_images=images)
    except OSError as exc:
        log.warning("the report of run %s was not written: %s", transcript.run_id, exc)
        return hidden
    for path in (md_path, pdf_path, json_path):
        ctx.files.grant(path, user)  # served to this user alone
    return tuple(gr.DownloadButton(value=str(path), visible=True) for path in (md_path, pdf_path, json_path))


def build_research_tab(ctx: AppContext):
    """Builds the view inside the current Blocks; returns (load_history, history table) for page load."""
    run_id = gr.State(None)
    opened = gr.State({})  # the source open beside the answer, as a strike needs it (app.source_view)
    active = ActiveRuns()
    shown = ShownRuns()
    with gr.Row():
        with gr.Column(scale=3):
            question = gr.Textbox(label="Question (Enter researches it)", lines=1, max_lines=4,
                                  placeholder=EXAMPLE_QUESTION, elem_id="question")
            with gr.Row():
                ask = gr.Button("Research", variant="primary", elem_id="ask", scale=3)
                stop = gr.Button("Stop", variant="stop", interactive=False, elem_id="stop", scale=1)
            review = gr.Checkbox(label=REVIEW_LABEL, value=False, elem_id="review-plan")
            gr.Examples([[q] for q in EXAMPLE_QUESTIONS], inputs=[question])
            run_status = gr.Markdown(elem_id="run-status")
            search_line = gr.Markdown(search_status(ctx), elem_id="search-status")
            # While the dense vectors are first built, the line follows their progress.
            gr.Timer(10).tick(lambda: search_status(ctx), None, [search_line], show_progress="hidden")
        with gr.Column(scale=2):
            ground_truth = gr.Textbox(label="Right answer, if you know it (the Judge grades against it)",
                                      elem_id="ground-truth")
            # A file, not gr.Image: gr.Image decodes uploads itself and answers a broken file with a bare
            # "Error"; the agent's own check says what is wrong and what to upload instead.
            image = gr.File(label="Image (optional: PNG, JPEG, GIF, WebP)", file_types=["image"],
                            type="filepath", elem_id="image")
            caption = gr.Textbox(label="What the image shows (optional)", elem_id="caption")

    with gr.Row(elem_id="answer-row", equal_height=False):
        with gr.Column(scale=3, min_width=420):
            answer_box = gr.HTML(TranscriptPage().answer_html(), elem_id="answer-box", js_on_load=KEEP_OPEN_JS,
                                 css_template=RESEARCH_CSS)
            with gr.Row(elem_id="downloads"):
                report_md = gr.DownloadButton("⬇ Report (Markdown)", visible=False, size="sm", scale=0,
                                              min_width=200, elem_id="download-report")
                report_pdf = gr.DownloadButton("⬇ Report (PDF)", visible=False, size="sm", scale=0, min_width=170,
                                               elem_id="download-pdf")
                report_json = gr.DownloadButton("⬇ Run (JSON)", visible=False, size="sm", scale=0, min_width=160,
                                                elem_id="download-json")
            plan_view = build_plan_editor()  # the plan to review, when "Review the plan first" is on
            follow = build_follow_up_box()
        # A cited source opens here, beside the answer, its sentence highlighted.
        with gr.Column(scale=2, min_width=320, visible=False, elem_id="source-view") as source_view:
            source_text = gr.HTML(SOURCE_HELP, elem_id="source-text", css_template=SOURCE_CSS)
            with gr.Row():
                strike = gr.Button("✗ This source is wrong", variant="stop", size="sm", visible=False,
                                   elem_id="strike-source")
                unstrike = gr.Button("Undo the strike", size="sm", visible=False, elem_id="unstrike-source")
                reanswer = gr.Button("Re-answer without it", variant="primary", size="sm", visible=False,
                                     elem_id="reanswer")
            strike_result = gr.Markdown(elem_id="strike-result")
            source_file = gr.File(label="The document", interactive=False, elem_id="source-file")

    gr.Markdown("**Research trace**: one line per step; click a line for its details.")
    trace = gr.HTML(TranscriptPage().trace_html(), elem_id="trace", js_on_load=KEEP_OPEN_JS, css_template=RESEARCH_CSS)

    with gr.Accordion("Feedback on this answer", open=True, elem_id="feedback"):
        with gr.Row():
            up = gr.Button("👍 Right", elem_id="thumbs-up", size="sm")
            down = gr.Button("👎 Wrong", elem_id="thumbs-down", size="sm")
            send = gr.Button("Send feedback (no thumbs)", elem_id="send-feedback", size="sm")
        with gr.Row():
            right_answer = gr.Textbox(label="The right answer (optional)", elem_id="right-answer")
            comment = gr.Textbox(label="Comment (optional)", elem_id="feedback-comment")
        feedback_result = gr.Markdown(elem_id="feedback-result")

    with gr.Accordion("Your past runs", open=False, elem_id="history"):
        refresh_history = gr.Button("Refresh", size="sm", elem_id="refresh-history")
        history = gr.Dataframe(headers=HISTORY_COLUMNS, interactive=False, wrap=True, max_height=300,
                               label="Click a run to reopen it with its full trace", elem_id="history-table")
        with gr.Row():
            reopen_id = gr.Textbox(label="Run id", elem_id="reopen-id", scale=3)
            reopen = gr.Button("Reopen with full trace", elem_id="reopen", scale=1)

    def views(transcript: TranscriptPage, limits: RunLimits | None = None) -> tuple[str, str]:
        return transcript.answer_html(limits), transcript.trace_html()

    def start_run(request: gr.Request):
        """At once, before the run waits for a free slot: the buttons, and the answer box marked working…"""
        if active.running(_session(request)):
            return (gr.update(), gr.update(), "A run is already under way on this page: stop it or wait for it.",
                    *(gr.update(),) * 4)
        waiting = ('<div class="answer-box working" data-state="working"><div class="answer-head">'
                   '<span class="answer-badge badge-working">working…</span></div>'
                   '<div class="answer-text pending">Starting the run…</div></div>')
        return (gr.Button(interactive=False), gr.Button(interactive=True), "", waiting,
                *(gr.DownloadButton(visible=False),) * 3)

    def run_question(q: str, img: str | None, cap: str, gt: str, review_first: bool, steer: dict | None,
                     request: gr.Request):
        session = _session(request)
        stop_switch = active.begin(session)
        if stop_switch is None:  # this page already has a run under way; leave its view alone
            yield (gr.update(),) * 7
            return
        spent.put(session, steering_key(steer))
        limits = run_limits(ctx)
        user = ctx.user_of(request)
        run = RunRequest(question=q or "", namespace=ctx.namespace_of(request), image=img or None,
                         caption=cap or None, ground_truth=gt or None)
        hidden = gr.DownloadButton(visible=False)
        try:
            if review_wanted(review_first, steer):  # the plan is drafted for the person to edit; Run this plan runs it
                draft = draft_for_review(ctx, run)
                drafts.put(session, draft)
                yield drafting_box(draft), gr.update(), gr.update(), "", hidden, hidden, hidden
                return
            run = steered(run, steer)
            question_run = QuestionRun(ctx, run, stop_switch)
            transcript = question_run.transcript
            attach_thread(ctx, run.namespace, transcript, run.follow_up.of_run if run.follow_up else None)
            shown.show(session, transcript)
            try:
                # closing(): when the page goes away, Gradio closes this generator, and the run goes on
                # in the background (QuestionRun.follow) instead of stopping unlogged in the middle.
                # The feedback box is cleared once, at the start: feedback given once the answer shows,
                # while the reports are still being written, must not be wiped by the run's last updates.
                yield *views(transcript, limits), transcript.run_id, "", hidden, hidden, hidden
                kept = gr.update()
                with closing(question_run.follow()) as updates:
                    for _ in updates:
                        yield *views(transcript, limits), transcript.run_id, kept, hidden, hidden, hidden
            except Exception as exc:  # the agent reports its own errors as events; this is a last guard
                log.exception("run failed outside the agent")
                transcript.note(f"The run stopped: {exc}", "❌")
            # the final answer first; the reports (the PDF takes a second) then
            yield *views(transcript), transcript.run_id, gr.update(), hidden, hidden, hidden
            yield *views(transcript), transcript.run_id, gr.update(), *report_downloads(ctx, transcript, user, run.namespace)
        finally:
            active.end(session, stop_switch)

    def end_run(request: gr.Request):
        if active.running(_session(request)):  # a second submission ended; the page's run goes on
            return gr.update(), gr.update(), gr.update()
        return gr.Button(interactive=True), gr.Button(interactive=False), ""

    def request_stop(request: gr.Request):
        if active.stop(_session(request)):
            return gr.Button(interactive=False), STOP_NOTE
        return gr.Button(interactive=False), "No run is under way on this page."

    def give_feedback(thumbs: str | None, current_run: str | None, answer: str, note: str, request: gr.Request) -> str:
        if not current_run:
            return "Run a question (or reopen a past run) first; feedback applies to the run shown above."
        try:
            ctx.require_writable()
            outcome = submit_feedback(
                store=ctx.runtime.store, runlog=ctx.runtime.runlog, judge=Judge(ctx.runtime.agent.models["judge"]),
                queue=ctx.queue, namespace=ctx.namespace_of(request), run_id=current_run,
                user=ctx.user_of(request), thumbs=thumbs, right_answer=answer, comment=note,
                search=query_tool(offered_tools(ctx.runtime.agent.tools, has_image=False,
                                                namespace=ctx.namespace_of(request))),
            )
        except (FeedbackError, ReadOnlyModeError, MemoryStoreError, LLMError) as exc:
            return f"⚠️ {escape_markdown(exc)}"
        scope = None if ctx.users is None or ctx.is_admin(request) else ctx.namespace_of(request)
        changes = feedback_changes(ctx, outcome.changes, thumbs=thumbs, right_answer=answer, namespace=scope)
        return "**Feedback applied.**\n\n" + "\n".join(f"- {escape_markdown(line)}" for line in changes)

    def logged_transcript(namespace: str, wanted: str) -> TranscriptPage:
        """A past run rebuilt from the run log, with the person's verdict and right answer when
        feedback gave them."""
        transcript = transcript_of(ctx.runtime.runlog.load(namespace, wanted))
        transcript.feedback = person_verdicts(ctx, namespace).get(wanted)
        transcript.memory = own_memory(ctx, namespace, transcript)
        transcript.interrupted = not transcript.done and wanted not in ctx.runs_under_way
        thread_of_logged(ctx, namespace, transcript)
        return transcript

    def after_feedback(current_run: str | None, request: gr.Request):
        """The answer box and the report again, now with the person's verdict and right answer."""
        if not current_run or ctx.read_only:
            return (gr.update(),) * 4
        try:
            transcript = logged_transcript(ctx.namespace_of(request), current_run)
        except (KeyError, ValueError):
            return (gr.update(),) * 4
        if not active.running(_session(request)):
            shown.show(_session(request), transcript)
        return transcript.answer_html(), *report_downloads(ctx, transcript, ctx.user_of(request),
                                                           ctx.namespace_of(request))

    def source_shown(view: SourceView, namespace: str):
        """The source column's updates: the source, its file, what a strike needs, and the buttons."""
        key = view.opened.get("key")
        struck = bool(key) and key in ctx.runtime.store.struck_keys(namespace)
        return (gr.Column(visible=True), view.html, view.file, view.opened,
                gr.Button(visible=bool(key) and not struck and not ctx.read_only),
                gr.Button(visible=struck), gr.Button(visible=struck), STRUCK_NOTE if struck else "")

    def show_citation(evt: gr.EventData, request: gr.Request):
        """A citation mark clicked in the answer (the page sends the citation's key, run:cite:n): its
        source beside the answer, read from this page's run (or the caller's own run log)."""
        data = evt._data if isinstance(evt._data, dict) else {}
        wanted, _, number = str(data.get("key") or "")[:300].rpartition(":cite:")
        namespace = ctx.namespace_of(request)
        transcript = shown.get(_session(request), wanted)
        if transcript is None and wanted and not ctx.read_only:
            try:
                transcript = logged_transcript(namespace, wanted)
            except (KeyError, ValueError):
                transcript = None
        if transcript is None or not number.isdigit():
            return source_shown(SourceView("<p>⚠️ That run is not open on this page; reopen it from your past "
                                           "runs.</p>"), namespace)
        view = open_citation(ctx, namespace, ctx.user_of(request), transcript, int(number))
        log.info("source [%s] of run %s opened in %.2f s", number, wanted, view.seconds)
        return source_shown(view, namespace)

    def show_source(evt: gr.EventData, request: gr.Request):
        """A doc:// link clicked in the trace (the page sends its locator as the event's data)."""
        data = evt._data if isinstance(evt._data, dict) else {}
        locator = data.get("locator")
        view = open_locator(ctx, ctx.namespace_of(request), ctx.user_of(request),
                            locator if isinstance(locator, str) and len(locator) <= 2000 else "")
        return source_shown(view, ctx.namespace_of(request))

    def strike_source(source: dict, request: gr.Request):
        """"This is wrong": the open source is not retrieved again in the caller's namespace."""
        if not source.get("key"):
            return "Open a source from the answer's citations first.", *(gr.update(),) * 3
        namespace = ctx.namespace_of(request)
        try:
            ctx.require_writable()
            memory_id = source.get("memory_id")
            struck = ctx.runtime.store.strike(
                source["key"], namespace=namespace, title=source.get("title") or "(untitled)",
                source=source.get("source") or "", url=source.get("url"), sentence=source.get("sentence"),
                memory_id=memory_id, run_id=source.get("run_id"), actor=ctx.user_of(request))
        except (ReadOnlyModeError, MemoryStoreError) as exc:
            return f"⚠️ {escape_markdown(exc)}", *(gr.update(),) * 3
        recorded = (" The strike is in the history of this run's memory (the Memory view), with undo."
                    if struck.strike_history_id is not None else "")
        return (f"Struck: **{escape_markdown(struck.title)}** is no longer retrieved for your questions. "
                f"Re-answer the question without it, or undo the strike.{recorded}",
                gr.Button(visible=False), gr.Button(visible=True), gr.Button(visible=True))

    def unstrike_source(source: dict, request: gr.Request):
        if not source.get("key"):
            return "Open a source from the answer's citations first.", *(gr.update(),) * 3
        try:
            ctx.require_writable()
            ctx.runtime.store.unstrike(source["key"], namespace=ctx.namespace_of(request), actor=ctx.user_of(request))
        except (ReadOnlyModeError, MemoryStoreError) as exc:
            return f"⚠️ {escape_markdown(exc)}", *(gr.update(),) * 3
        return (f"Undone: **{escape_markdown(source.get('title'))}** is retrieved again.",
                gr.Button(visible=True), gr.Button(visible=False), gr.Button(visible=True))

    def reopen_run(wanted: str, request: gr.Request):
        wanted = (wanted or "").strip()
        unchanged = (gr.update(),) * 3
        if ctx.read_only:
            return *unchanged, READ_ONLY_HISTORY, *(gr.update(),) * 3
        if active.running(_session(request)):
            return (*unchanged, "A run is under way on this page: stop it (or wait for it) before reopening another.",
                    *(gr.update(),) * 3)
        try:
            transcript = logged_transcript(ctx.namespace_of(request), wanted)
        except (KeyError, ValueError):
            return (*unchanged, f"⚠️ No run {escape_markdown(wanted)!s} in your history; pick a run from the table.",
                    *(gr.update(),) * 3)
        shown.show(_session(request), transcript)
        return (*views(transcript), wanted, f"Reopened run `{escape_markdown(wanted)}`.",
                *report_downloads(ctx, transcript, ctx.user_of(request), ctx.namespace_of(request)))

    def pick_history_row(evt: gr.SelectData) -> str:
        return str(evt.row_value[0]) if evt.row_value else ""

    def load_history(request: gr.Request) -> list[list]:
        return history_rows(ctx, ctx.namespace_of(request))

    steering = gr.State({})  # what the next run is given: the person's plan, or a follow-up (app.steering)
    drafts = PerPage()  # the plan drafted for review, until the editor shows it
    spent = PerPage()  # the steering (steering_key) each page's last run was given
    inputs = [question, image, caption, ground_truth, review, steering]
    downloads = [report_md, report_pdf, report_json]

    def after_run(steer: dict | None, request: gr.Request):
        """The plan editor (a plan drafted for review, else hidden) and the steering spent."""
        left = steering_left(spent.take(_session(request)), steer)
        return *editor_shown(drafts.take(_session(request))), gr.update() if left is None else left

    def research(started):
        """A question's run, once `started` (start_run) has set the page up."""
        return (started
                .then(run_question, inputs, [answer_box, trace, run_id, feedback_result, *downloads],
                      concurrency_limit=RUNS_AT_ONCE, concurrency_id="research")
                .then(end_run, None, [ask, stop, run_status], concurrency_limit=None)
                .then(after_run, [steering], [plan_view.group, plan_view.note, plan_view.editor, plan_view.drafted, steering],
                      concurrency_limit=None)
                .then(load_history, None, [history]))

    def steered_research(step):
        """A run the person steered, once `step` has set the steering (nothing runs when it refused)."""
        started = (step.then(require_steering, [steering], None, concurrency_limit=None)
                   .success(start_run, None, [ask, stop, run_status, answer_box, *downloads], concurrency_limit=None))
        return research(started)

    steered_research(plan_view.run.click(lambda edited, drafted: checked_steering(ctx, edited, drafted),
                                         [plan_view.editor, plan_view.drafted],
                                         [steering, plan_view.note, plan_view.editor], concurrency_limit=None))

    def ask_follow_up(asked: str, current: str | None, request: gr.Request):
        return follow_up_steering(ctx, asked, current, ctx.namespace_of(request))

    for asked_again in (follow.ask.click, follow.asked.submit):
        steered_research(asked_again(ask_follow_up, [follow.asked, run_id],
                                     [steering, follow.rewritten, follow.note, follow.follows]))
    steered_research(follow.research_rewritten.click(own_wording_steering, [follow.rewritten, follow.asked, follow.follows],
                                                     [steering, follow.note], concurrency_limit=None))

    research(gr.on([ask.click, question.submit], start_run, None, [ask, stop, run_status, answer_box, *downloads],
                   trigger_mode="once", concurrency_limit=None))
    # Re-answer the question of the source open beside the answer: the same run chain, its question filled in.
    research(reanswer.click(lambda source: source.get("question") or gr.update(), [opened], [question],
                            concurrency_limit=None)
             .then(start_run, None, [ask, stop, run_status, answer_box, *downloads], concurrency_limit=None))
    strike_buttons = [strike, unstrike, reanswer]
    strike.click(strike_source, [opened], [strike_result, *strike_buttons], concurrency_limit=None)
    unstrike.click(unstrike_source, [opened], [strike_result, *strike_buttons], concurrency_limit=None)
    stop.click(request_stop, None, [stop, run_status], concurrency_limit=None)
    for button, thumbs in ((up, "up"), (down, "down"), (send, None)):
        (button.click(_with_thumbs(give_feedback, thumbs), [run_id, right_answer, comment], [feedback_result])
         .then(after_feedback, [run_id], [answer_box, *downloads]).then(load_history, None, [history]))
    refresh_history.click(load_history, None, [history])
    reopen_outputs = [answer_box, trace, run_id, feedback_result, *downloads]
    history.select(pick_history_row, None, [reopen_id]).then(reopen_run, [reopen_id], reopen_outputs)
    reopen.click(reopen_run, [reopen_id], reopen_outputs)
    source_outputs = [source_view, source_text, source_file, opened, *strike_buttons, strike_result]
    answer_box.open_citation(show_citation, None, source_outputs, concurrency_limit=None)
    for view in (answer_box, trace):
        view.open_source(show_source, None, source_outputs, concurrency_limit=None)
    return load_history, history
