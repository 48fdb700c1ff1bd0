"""A run as the research page shows it: the answer box with the report downloads under it, and the
trace below (both drawn by app/render_html.py); the reports a run's downloads serve."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import gradio as gr

from app.render_html import TranscriptPage
from app.report import write_report_files
from app.report_pdf import write_report_pdf
from app.research_assets import KEEP_OPEN_JS, RESEARCH_CSS
from app.session import AppContext
from app.source_view import page_images
from app.transcript import RunLimits, RunTranscript

log = logging.getLogger(__name__)


@dataclass
class AnswerBoxPart:
    box: gr.HTML
    report_md: gr.DownloadButton
    report_pdf: gr.DownloadButton
    report_json: gr.DownloadButton

    @property
    def downloads(self) -> list[gr.DownloadButton]:
        return [self.report_md, self.report_pdf, self.report_json]


def build_answer_box() -> AnswerBoxPart:
    """The answer box, and under it the buttons that download the run's reports (shown once written)."""
    answer_box = gr.HTML(TranscriptPage().answer_html(), elem_id="answer-box", js_on_load=KEEP_OPEN_JS,
                         css_template=RESEARCH_CSS)
    with gr.Row(elem_id="downloads"):
        report_md = gr.DownloadButton("⬇ Report (Markdown)", visible=False, size="sm", scale=0,
                                      min_width=200, elem_id="download-report")
        report_pdf = gr.DownloadButton("⬇ Report (PDF)", visible=False, size="sm", scale=0, min_width=170,
                                       elem_id="download-pdf")
        report_json = gr.DownloadButton("⬇ Run (JSON)", visible=False, size="sm", scale=0, min_width=160,
                                        elem_id="download-json")
    return AnswerBoxPart(answer_box, report_md, report_pdf, report_json)


def build_trace() -> gr.HTML:
    """The research trace, under the answer row."""
    gr.Markdown("**Research trace**: one line per step; click a line for its details.")
    return gr.HTML(TranscriptPage().trace_html(), elem_id="trace", js_on_load=KEEP_OPEN_JS, css_template=RESEARCH_CSS)


def views(transcript: TranscriptPage, limits: RunLimits | None = None) -> tuple[str, str]:
    """The answer box's HTML and the trace's."""
    return transcript.answer_html(limits), transcript.trace_html()


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
