"""The research view: ask, watch the trace form, give feedback, reopen past runs."""

from __future__ import annotations

import logging
from datetime import datetime

import gradio as gr

from app.render import ChatTranscript, esc, transcript_of
from app.session import AppContext, ReadOnlyModeError
from backend.agent import RunRequest
from backend.events import RunFinished
from backend.feedback import FeedbackError, submit_feedback
from backend.judge import Judge
from backend.llm.base import LLMError
from memory_db import MemoryStoreError

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


def history_rows(ctx: AppContext, namespace: str) -> list[list]:
    if ctx.read_only:  # its runs are not logged; older runs of the shared namespace are no visitor's
        return []
    return [
        [r.run_id, datetime.fromtimestamp(r.started).strftime("%Y-%m-%d %H:%M"), r.question, r.answer, r.verdict]
        for r in ctx.runtime.runlog.list_runs(namespace, limit=100)
    ]


NOT_RUNNING_SENTENCE = "Test-time learning is not running yet"


def search_status(ctx: AppContext) -> str:
    tool = ctx.runtime.agent.tools.get("search")
    index = getattr(tool, "index", None)
    return f"Search: {esc(index.search_mode())}." if index is not None else ""


def learning_state_line(ctx: AppContext, namespace: str | None = None) -> str:
    """One sentence on what test-time learning does with feedback right now; with `namespace`, the
    signals counted are that namespace's only (a user with logins sees no one else's)."""
    learner = ctx.learner
    if learner is None and ctx.runtime.config.ttrl.enabled:
        return "Test-time learning is not running in this app (it was started without its learner); the feedback stays queued."
    if learner is None:
        return "Test-time learning is switched off (ttrl.enabled = false in mia.toml); the feedback stays queued."
    from training.ttrl.signals import signal_from_feedback

    status = learner.status()
    unread = [i for i in ctx.queue.items(skip_damaged=True)[learner.feedback_cursor:]
              if signal_from_feedback(i) is not None and namespace in (None, i.namespace)]
    waiting = status.pending if namespace is None else sum(1 for s in list(learner.pending) if s.namespace == namespace)
    pending = waiting + len(unread)
    signals = f"{pending} signal{'s' if pending != 1 else ''} pending"
    version = f"current version v{status.current_version:04d}"
    if not status.enabled:
        return f"Test-time learning is switched off in its settings; {signals} stay queued ({version})."
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


def queue_for_learning(ctx: AppContext, transcript: ChatTranscript, question: str, namespace: str, *,
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
    try:
        pending = ctx.learner.submit(Signal(question.strip(), kind, namespace, gold, f"{kind}:{transcript.run_id}"))
    except SignalError as exc:
        log.warning("run %s not queued for test-time learning: %s", transcript.run_id, exc)
        return None
    how = "against your right answer" if gold else "by the Judge's evaluators (unsupervised)"
    return (f"Queued for test-time learning: the Planner's rollouts on this question are graded {how}; "
            f"{pending} signal{'s' if pending != 1 else ''} pending.")


def _with_thumbs(give_feedback, thumbs: str | None):
    def handler(current_run: str | None, answer: str, note: str, request: gr.Request) -> str:
        return give_feedback(thumbs, current_run, answer, note, request)

    return handler


def build_research_tab(ctx: AppContext):
    """Builds the view inside the current Blocks; returns (load_history, history table) for page load."""
    run_id = gr.State(None)
    with gr.Row():
        with gr.Column(scale=3):
            question = gr.Textbox(label="Question", lines=2, placeholder=EXAMPLE_QUESTION, elem_id="question")
            ground_truth = gr.Textbox(label="Right answer, if you know it (the Judge grades against it)",
                                      elem_id="ground-truth")
            with gr.Row():
                ask = gr.Button("Research", variant="primary", elem_id="ask")
                gr.Examples([[q] for q in EXAMPLE_QUESTIONS], inputs=[question])
            search_line = gr.Markdown(search_status(ctx), elem_id="search-status")
            # While the dense vectors are first built, the line follows their progress.
            gr.Timer(10).tick(lambda: search_status(ctx), None, [search_line], show_progress="hidden")
        with gr.Column(scale=1):
            # A file, not gr.Image: gr.Image decodes uploads itself and answers a broken file with a bare
            # "Error"; the agent's own check says what is wrong and what to upload instead.
            image = gr.File(label="Image (optional: PNG, JPEG, GIF, WebP)", file_types=["image"], type="filepath",
                            elem_id="image", height=120)
            caption = gr.Textbox(label="What the image shows (optional)", elem_id="caption")
    chat = gr.Chatbot(label="Research trace", height=560, elem_id="trace",
                      placeholder="Memories, the plan, each step, the answer and a run summary appear here.")

    with gr.Accordion("Feedback on this answer", open=True, elem_id="feedback"):
        with gr.Row():
            up = gr.Button("👍 Right", elem_id="thumbs-up")
            down = gr.Button("👎 Wrong", elem_id="thumbs-down")
        right_answer = gr.Textbox(label="The right answer (optional)", elem_id="right-answer")
        comment = gr.Textbox(label="Comment (optional)", elem_id="feedback-comment")
        send = gr.Button("Send feedback (no thumbs)", elem_id="send-feedback", size="sm")
        feedback_result = gr.Markdown(elem_id="feedback-result")

    with gr.Accordion("Your past runs", open=False, elem_id="history"):
        refresh_history = gr.Button("Refresh", size="sm", elem_id="refresh-history")
        history = gr.Dataframe(headers=HISTORY_COLUMNS, interactive=False, wrap=True, max_height=300,
                               elem_id="history-table")
        with gr.Row():
            reopen_id = gr.Textbox(label="Run id", elem_id="reopen-id", scale=3)
            reopen = gr.Button("Reopen with full trace", elem_id="reopen", scale=1)

    def run_question(q: str, img: str | None, cap: str, gt: str, request: gr.Request):
        transcript = ChatTranscript()
        finished = False
        run = RunRequest(question=q or "", namespace=ctx.namespace_of(request), image=img or None,
                         caption=cap or None, ground_truth=gt or None)
        try:
            for event in ctx.agent.run(run):
                transcript.add(event)
                finished = finished or isinstance(event, RunFinished)
                yield transcript.messages, transcript.run_id, ""
        except Exception as exc:  # the agent reports its own errors as events; this is a last guard
            log.exception("run failed outside the agent")
            transcript.messages.append({"role": "assistant", "content": f"❌ The run stopped: {esc(exc)}"})
            yield transcript.messages, transcript.run_id, ""
            return
        queued = queue_for_learning(ctx, transcript, run.question, run.namespace, finished=finished,
                                    ground_truth=run.ground_truth,
                                    image=run.image)
        if queued:
            transcript.messages.append({"role": "assistant", "content": esc(queued),
                                        "metadata": {"title": "🎓 Test-time learning", "status": "done"}})
            yield transcript.messages, transcript.run_id, ""

    def give_feedback(thumbs: str | None, current_run: str | None, answer: str, note: str, request: gr.Request) -> str:
        if not current_run:
            return "Run a question (or reopen a past run) first; feedback applies to the run shown above."
        try:
            ctx.require_writable()
            outcome = submit_feedback(
                store=ctx.runtime.store, runlog=ctx.runtime.runlog, judge=Judge(ctx.runtime.agent.models["judge"]),
                queue=ctx.queue, namespace=ctx.namespace_of(request), run_id=current_run,
                user=ctx.user_of(request), thumbs=thumbs, right_answer=answer, comment=note,
            )
        except (FeedbackError, ReadOnlyModeError, MemoryStoreError, LLMError) as exc:
            return f"⚠️ {esc(exc)}"
        scope = None if ctx.users is None or ctx.is_admin(request) else ctx.namespace_of(request)
        changes = feedback_changes(ctx, outcome.changes, thumbs=thumbs, right_answer=answer, namespace=scope)
        return "**Feedback applied.**\n\n" + "\n".join(f"- {esc(line)}" for line in changes)

    def reopen_run(wanted: str, request: gr.Request):
        wanted = (wanted or "").strip()
        if ctx.read_only:
            return gr.update(), gr.update(), READ_ONLY_HISTORY
        try:
            events = ctx.runtime.runlog.load(ctx.namespace_of(request), wanted)
        except (KeyError, ValueError):
            return gr.update(), gr.update(), f"⚠️ No run {esc(wanted)!s} in your history; pick a run id from the table."
        return transcript_of(events).messages, wanted, f"Reopened run `{esc(wanted)}`."

    def pick_history_row(evt: gr.SelectData) -> str:
        return str(evt.row_value[0]) if evt.row_value else ""

    def load_history(request: gr.Request) -> list[list]:
        return history_rows(ctx, ctx.namespace_of(request))

    inputs = [question, image, caption, ground_truth]
    for trigger in (ask.click, question.submit):
        trigger(run_question, inputs, [chat, run_id, feedback_result], concurrency_limit=4,
                concurrency_id="research").then(load_history, None, [history])
    for button, thumbs in ((up, "up"), (down, "down"), (send, None)):
        button.click(_with_thumbs(give_feedback, thumbs), [run_id, right_answer, comment], [feedback_result])
    refresh_history.click(load_history, None, [history])
    history.select(pick_history_row, None, [reopen_id])
    reopen.click(reopen_run, [reopen_id], [chat, run_id, feedback_result])
    return load_history, history
