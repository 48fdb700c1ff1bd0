"""Small pieces of a run's HTML that both the answer box (app/answer_html.py) and the trace
(app/trace_html.py) draw: a web link, the button that opens a passage of the person's own documents,
the link to a memory, and the run's label with how its verdict was reached."""

from __future__ import annotations

import re

from app.escaping import escape_html
from app.report import document_place, web_link
from app.transcript import RunTranscript
from app.wording import verdict_provenance
from backend.labels import verdict_words

_MEMORY_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")


def link_href(url: str | None) -> str | None:
    """An http(s) URL escaped for an href attribute, or None (doc:// locators are not links)."""
    link = web_link(url)
    return escape_html(link) if link else None


def source_opener(url: str | None) -> str:
    """For a passage of the person's own documents (a doc:// locator), a button that opens it: the
    page asks the server (the research page's `open_source` event), which reads it from the caller's own
    namespace or the shared collections; '' for anything else."""
    if document_place(url) is None:
        return ""
    return (f'<button type="button" class="doc-open" data-doc="{escape_html(url)}" title="{escape_html(url)}">'
            f'📄 open the passage in your documents</button>')


def memory_anchor(memory_id: str) -> str:
    """A link that opens the memory in the Memory view (a new page at ?memory=ID)."""
    if not _MEMORY_ID.match(memory_id):
        return f"<code>{escape_html(memory_id[:8])}</code>"
    return f'<a href="?memory={memory_id}" target="_blank" rel="noopener"><code>{memory_id[:8]}</code></a>'


def label_html(transcript: RunTranscript) -> str:
    """The run's label (RunTranscript.label, the words every view shows) and how the verdict was reached;
    where a person's word or their memory's label has replaced the verdict, what the verdict said."""
    label, judged = transcript.label, verdict_words(transcript.verdict)
    detail = verdict_provenance(transcript.verdict) if label == judged else f"the run's own verdict was {judged}"
    return f'<b class="run-label">{escape_html(label)}</b>, {escape_html(detail)}'
