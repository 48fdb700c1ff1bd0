"""The research page's side of a question's run: started at once (the buttons, the answer box marked
working…), run (the answer and the trace streamed, or the plan drafted for review), ended, stopped,
and after it the plan editor and the steering spent (app.steering)."""

from __future__ import annotations

import logging
from contextlib import closing

import gradio as gr

from app.question_run import ActiveRuns, QuestionRun, ShownRuns, run_limits, session_of
from app.run_view import report_downloads, views
from app.session import AppContext
from app.steering import (PerPage, attach_thread, draft_for_review, drafting_box, editor_shown, review_wanted, steered,
                          steering_key, steering_left)
from backend.agent import RunRequest

log = logging.getLogger(__name__)

STOP_NOTE = "Stopping: the run ends before its next model call, with the answer so far."


class RunEvents:
    """A question's run from the page; each page runs one question at a time."""

    def __init__(self, ctx: AppContext, active: ActiveRuns, shown: ShownRuns) -> None:
        self.ctx, self.active, self.shown = ctx, active, shown
        self.drafts = PerPage()  # the plan drafted for review, until the editor shows it
        self.spent = PerPage()  # the steering (steering_key) each page's last run was given

    def start_run(self, request: gr.Request):
        """At once, before the run waits for a free slot: the buttons, and the answer box marked working…"""
        if self.active.running(session_of(request)):
            return (gr.update(), gr.update(), "A run is already under way on this page: stop it or wait for it.",
                    *(gr.update(),) * 4)
        waiting = ('<div class="answer-box working" data-state="working"><div class="answer-head">'
                   '<span class="answer-badge badge-working">working…</span></div>'
                   '<div class="answer-text pending">Starting the run…</div></div>')
        return (gr.Button(interactive=False), gr.Button(interactive=True), "", waiting,
                *(gr.DownloadButton(visible=False),) * 3)

    def run_question(self, q: str, img: str | None, cap: str, gt: str, review_first: bool, steer: dict | None,
                     request: gr.Request):
        ctx = self.ctx
        session = session_of(request)
        stop_switch = self.active.begin(session)
        if stop_switch is None:  # this page already has a run under way; leave its view alone
            yield (gr.update(),) * 7
            return
        self.spent.put(session, steering_key(steer))
        limits = run_limits(ctx)
        user = ctx.user_of(request)
        run = RunRequest(question=q or "", namespace=ctx.namespace_of(request), image=img or None,
                         caption=cap or None, ground_truth=gt or None)
        hidden = gr.DownloadButton(visible=False)
        try:
            if review_wanted(review_first, steer):  # the plan is drafted for the person to edit; Run this plan runs it
                draft = draft_for_review(ctx, run)
                self.drafts.put(session, draft)
                yield drafting_box(draft), gr.update(), gr.update(), "", hidden, hidden, hidden
                return
            run = steered(run, steer)
            question_run = QuestionRun(ctx, run, stop_switch)
            transcript = question_run.transcript
            attach_thread(ctx, run.namespace, transcript, run.follow_up.of_run if run.follow_up else None)
            self.shown.show(session, transcript)
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
            self.active.end(session, stop_switch)

    def end_run(self, request: gr.Request):
        if self.active.running(session_of(request)):  # a second submission ended; the page's run goes on
            return gr.update(), gr.update(), gr.update()
        return gr.Button(interactive=True), gr.Button(interactive=False), ""

    def request_stop(self, request: gr.Request):
        if self.active.stop(session_of(request)):
            return gr.Button(interactive=False), STOP_NOTE
        return gr.Button(interactive=False), "No run is under way on this page."

    def after_run(self, steer: dict | None, request: gr.Request):
        """The plan editor (a plan drafted for review, else hidden) and the steering spent."""
        left = steering_left(self.spent.take(session_of(request)), steer)
        return *editor_shown(self.drafts.take(session_of(request))), gr.update() if left is None else left
