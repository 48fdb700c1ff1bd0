"""Making text that came from a model, a page, a document or a memory inert before a person reads it:
one escaper for the Markdown the app's components render, one for the HTML it writes itself, one for
the Markdown report a person downloads.
"""

from __future__ import annotations

import html


def escape_markdown(text: object) -> str:
    """Escape for a Markdown component: HTML entities, and markdown's link/image/emphasis triggers."""
    escaped = str(text if text is not None else "")
    for ch in "\\`*_[]|#":
        escaped = escaped.replace(ch, "\\" + ch)
    # Quotes stay: the text lands in element content, never inside an attribute.
    return html.escape(escaped, quote=False)


def escape_html(text: object) -> str:
    """Escape for HTML written by the app: entities, quotes included, so that it is safe in element
    content and in a quoted attribute alike."""
    return html.escape(str(text if text is not None else ""), quote=True)


def escape_markdown_file(text: object) -> str:
    """Escape for a downloaded Markdown document (the run report): markdown's link, emphasis and table
    triggers and HTML's < > backslash-escaped, no HTML entities; carriage returns dropped."""
    escaped = str(text if text is not None else "")
    for ch in "\\`*_[]|#<>":
        escaped = escaped.replace(ch, "\\" + ch)
    return escaped.replace("\r", "")
