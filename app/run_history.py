"""Your past runs on the research page: the history table (a thread of follow-ups as one entry, the
verdict in the words every view uses), and a past run reopened from the run log with its full trace."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import gradio as gr

from app.escaping import escape_markdown
from app.memory_view import SCAN_LIMIT
from app.question_run import ActiveRuns, ShownRuns, session_of
from app.render_html import TranscriptPage, transcript_of
from app.run_view import report_downloads, views
from app.session import AppContext
from app.steering import thread_of_logged
from app.transcript import RunTranscript
from backend.feedback_queue import FeedbackItem
from backend.labels import is_runs_own, run_words
from memory_db import MemoryNotFoundError, UnreadableMemoryError
from memory_db.provenance import read_provenance

HISTORY_COLUMNS = ["run id", "started", "question", "answer", "verdict"]
READ_ONLY_HISTORY = "⚠️ The read-only demo keeps no runs: its visitors share one namespace."
UNDER_WAY = "under way"
INTERRUPTED = "interrupted: the app stopped before the run finished"


def person_verdicts(ctx: AppContext, namespace: str) -> dict[str, FeedbackItem]:
    """Per run, the latest feedback that carries a person's verdict (thumbs or a right answer)."""
    latest: dict[str, FeedbackItem] = {}
    for item in ctx.queue.items(namespace, skip_damaged=True):
        if item.thumbs is not None or item.right_answer is not None:
            latest[item.run_id] = item
    return latest


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


def logged_transcript(ctx: AppContext, namespace: str, wanted: str) -> TranscriptPage:
    """A past run rebuilt from the run log, with the person's verdict and right answer when
    feedback gave them."""
    transcript = transcript_of(ctx.runtime.runlog.load(namespace, wanted))
    transcript.feedback = person_verdicts(ctx, namespace).get(wanted)
    transcript.memory = own_memory(ctx, namespace, transcript)
    transcript.interrupted = not transcript.done and wanted not in ctx.runs_under_way
    thread_of_logged(ctx, namespace, transcript)
    return transcript


@dataclass
class HistoryPanel:
    refresh: gr.Button
    table: gr.Dataframe
    reopen_id: gr.Textbox
    reopen: gr.Button


def build_history_panel() -> HistoryPanel:
    """Your past runs, folded away under the feedback."""
    with gr.Accordion("Your past runs", open=False, elem_id="history"):
        refresh_history = gr.Button("Refresh", size="sm", elem_id="refresh-history")
        history = gr.Dataframe(headers=HISTORY_COLUMNS, interactive=False, wrap=True, max_height=300,
                               label="Click a run to reopen it with its full trace", elem_id="history-table")
        with gr.Row():
            reopen_id = gr.Textbox(label="Run id", elem_id="reopen-id", scale=3)
            reopen = gr.Button("Reopen with full trace", elem_id="reopen", scale=1)
    return HistoryPanel(refresh_history, history, reopen_id, reopen)


class HistoryEvents:
    """The history's events: the table loaded or refreshed, a past run picked and reopened."""

    def __init__(self, ctx: AppContext, active: ActiveRuns, shown: ShownRuns) -> None:
        self.ctx, self.active, self.shown = ctx, active, shown

    def reopen_run(self, wanted: str, request: gr.Request):
        wanted = (wanted or "").strip()
        unchanged = (gr.update(),) * 3
        if self.ctx.read_only:
            return *unchanged, READ_ONLY_HISTORY, *(gr.update(),) * 3
        if self.active.running(session_of(request)):
            return (*unchanged, "A run is under way on this page: stop it (or wait for it) before reopening another.",
                    *(gr.update(),) * 3)
        try:
            transcript = logged_transcript(self.ctx, self.ctx.namespace_of(request), wanted)
        except (KeyError, ValueError):
            return (*unchanged, f"⚠️ No run {escape_markdown(wanted)!s} in your history; pick a run from the table.",
                    *(gr.update(),) * 3)
        self.shown.show(session_of(request), transcript)
        return (*views(transcript), wanted, f"Reopened run `{escape_markdown(wanted)}`.",
                *report_downloads(self.ctx, transcript, self.ctx.user_of(request), self.ctx.namespace_of(request)))

    @staticmethod
    def pick_history_row(evt: gr.SelectData) -> str:
        return str(evt.row_value[0]) if evt.row_value else ""

    def load_history(self, request: gr.Request) -> list[list]:
        return history_rows(self.ctx, self.ctx.namespace_of(request))
