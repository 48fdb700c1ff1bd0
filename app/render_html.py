"""The research page's HTML of a run: the answer first, in a box (app/answer_html.py, the page's
#answer-box), and below it the trace (app/trace_html.py, #trace), one line per step, its details on
expand; their shared script and style are app/research_assets.py. Everything from a model, a page, a
document or a memory goes through escape_html before it reaches the browser."""

from __future__ import annotations

from typing import Iterable

from app.answer_html import AnswerBox
from app.trace_html import TraceView
from backend.events import Event


class TranscriptPage(AnswerBox, TraceView):
    """A run's transcript as the research page shows it: the answer box and the trace, as HTML."""


def transcript_of(events: Iterable[Event]) -> TranscriptPage:
    transcript = TranscriptPage()
    for event in events:
        transcript.add(event)
    return transcript
