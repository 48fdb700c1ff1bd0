"""Making text that came from a model, a page, a document or a memory inert before it reaches the
browser: one escaper for the Markdown the app's components render, one for the HTML it writes itself.
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


def safe_url(url: str | None) -> str | None:
    """An http(s) URL made safe to put in a markdown link target, or None."""
    if not url or not url.lower().startswith(("http://", "https://")):
        return None
    return html.escape(url, quote=True).replace(" ", "%20").replace("(", "%28").replace(")", "%29")
