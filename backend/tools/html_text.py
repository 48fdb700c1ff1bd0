"""Readable paragraphs out of an HTML page: scripts, styles, navigation and forms are dropped.

The text is returned as data; nothing in it is acted upon.
"""

from __future__ import annotations

import re

import lxml.html
from lxml import etree

DROPPED_TAGS = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "svg", "iframe", "template", "button")
BLOCK_TAGS = (
    "p", "div", "section", "article", "main", "li", "ul", "ol", "dd", "dt", "table", "tr", "td", "th",
    "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "br", "figcaption", "caption",
)  # fmt: skip
XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>", re.IGNORECASE)
PARAGRAPH_BREAK = "\n\n"


def html_title_and_paragraphs(html: str) -> tuple[str, list[str]]:
    html = XML_DECLARATION.sub("", html)
    if not html.strip():
        return "", []
    try:
        root = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return "", text_paragraphs(re.sub(r"<[^>]+>", " ", html))
    title_element = root.find(".//title")
    title = " ".join(title_element.text_content().split()) if title_element is not None else ""
    for element in list(root.iter(*DROPPED_TAGS, "title", etree.Comment)):
        element.drop_tree()
    for element in root.iter(*BLOCK_TAGS):
        element.tail = PARAGRAPH_BREAK + (element.tail or "")
        element.text = PARAGRAPH_BREAK + (element.text or "")
    return title, text_paragraphs(root.text_content())


def text_paragraphs(text: str) -> list[str]:
    """Blank-line separated blocks, whitespace collapsed, empty ones dropped."""
    blocks = (" ".join(block.split()) for block in re.split(r"\n\s*\n", text))
    return [block for block in blocks if block]
