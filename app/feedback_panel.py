"""Feedback on the answer shown: thumbs up or down, or feedback without thumbs, with the right answer
and a comment (backend.feedback applies it); the answer box and the reports again with the person's
verdict once it is given."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from app.escaping import escape_markdown
from app.learning_signals import feedback_changes
from app.question_run import ActiveRuns, ShownRuns, session_of
from app.run_history import logged_transcript
from app.run_view import report_downloads
from app.session import AppContext, ReadOnlyModeError
from backend.feedback import FeedbackError, submit_feedback
from backend.judge import Judge
from backend.llm.base import LLMError
from backend.tools.base import offered_tools, query_tool
from memory_db import MemoryStoreError


@dataclass
class FeedbackPanel:
    up: gr.Button
    down: gr.Button
    send: gr.Button
    right_answer: gr.Textbox
    comment: gr.Textbox
    result: gr.Markdown


def build_feedback_panel() -> FeedbackPanel:
    """The feedback controls, under the trace."""
    with gr.Accordion("Feedback on this answer", open=True, elem_id="feedback"):
        with gr.Row():
            up = gr.Button("👍 Right", elem_id="thumbs-up", size="sm")
            down = gr.Button("👎 Wrong", elem_id="thumbs-down", size="sm")
            send = gr.Button("Send feedback (no thumbs)", elem_id="send-feedback", size="sm")
        with gr.Row():
            right_answer = gr.Textbox(label="The right answer (optional)", elem_id="right-answer")
            comment = gr.Textbox(label="Comment (optional)", elem_id="feedback-comment")
        feedback_result = gr.Markdown(elem_id="feedback-result")
    return FeedbackPanel(up, down, send, right_answer, comment, feedback_result)


class FeedbackEvents:
    """Feedback given on the run shown, and the answer box and reports after it."""

    def __init__(self, ctx: AppContext, active: ActiveRuns, shown: ShownRuns) -> None:
        self.ctx, self.active, self.shown = ctx, active, shown

    def with_thumbs(self, thumbs: str | None):
        """give_feedback as a button's handler, with the button's thumbs."""
        def handler(current_run: str | None, answer: str, note: str, request: gr.Request) -> str:
            return self.give_feedback(thumbs, current_run, answer, note, request)

        return handler

    def give_feedback(self, thumbs: str | None, current_run: str | None, answer: str, note: str,
                      request: gr.Request) -> str:
        ctx = self.ctx
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

    def after_feedback(self, current_run: str | None, request: gr.Request):
        """The answer box and the report again, now with the person's verdict and right answer."""
        if not current_run or self.ctx.read_only:
            return (gr.update(),) * 4
        try:
            transcript = logged_transcript(self.ctx, self.ctx.namespace_of(request), current_run)
        except (KeyError, ValueError):
            return (gr.update(),) * 4
        if not self.active.running(session_of(request)):
            self.shown.show(session_of(request), transcript)
        return transcript.answer_html(), *report_downloads(self.ctx, transcript, self.ctx.user_of(request),
                                                           self.ctx.namespace_of(request))
