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


HEADING_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_HEADING_MARK = "\ue000heading\ue001"  # stands for a heading in the text (private-use characters, removed from the input)


def html_title_and_paragraphs(html: str) -> tuple[str, list[str]]:
    parsed = _readable_root(html)
    if isinstance(parsed, list):
        return "", parsed
    title, root = parsed
    return title, text_paragraphs(root.text_content())


def html_sections(html: str) -> tuple[str, list[tuple[str | None, list[str]]]]:
    """The page's title and its text cut at its headings: (heading, paragraphs) per section, the
    heading None for the text before the first one. The same text as html_title_and_paragraphs."""
    parsed = _readable_root(html.replace("\ue000", " ").replace("\ue001", " "))
    if isinstance(parsed, list):
        return "", [(None, parsed)] if parsed else []
    title, root = parsed
    for element in root.iter(*HEADING_TAGS):
        heading = " ".join(element.text_content().split())
        for child in list(element):
            element.remove(child)
        element.text = f"{PARAGRAPH_BREAK}{_HEADING_MARK}{heading}{PARAGRAPH_BREAK}"
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    for paragraph in text_paragraphs(root.text_content()):
        if paragraph.startswith(_HEADING_MARK):
            sections.append((paragraph[len(_HEADING_MARK):].strip() or None, []))
        else:
            sections[-1][1].append(paragraph)
    return title, [(heading, paragraphs) for heading, paragraphs in sections if paragraphs]


def _readable_root(html: str):
    """(title, root) with dropped tags gone and block elements set apart by blank lines, or the
    paragraphs of the tag-stripped text when lxml cannot parse it."""
    html = XML_DECLARATION.sub("", html)
    if not html.strip():
        return []
    try:
        root = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return text_paragraphs(re.sub(r"<[^>]+>", " ", html))
    title_element = root.find(".//title")
    title = " ".join(title_element.text_content().split()) if title_element is not None else ""
    for element in list(root.iter(*DROPPED_TAGS, "title", etree.Comment)):
        element.drop_tree()
    for element in root.iter(*BLOCK_TAGS):
        element.tail = PARAGRAPH_BREAK + (element.tail or "")
        element.text = PARAGRAPH_BREAK + (element.text or "")
    return title, root


def text_paragraphs(text: str) -> list[str]:
    """Blank-line separated blocks, whitespace collapsed, empty ones dropped."""
    blocks = (" ".join(block.split()) for block in re.split(r"\n\s*\n", text))
    return [block for block in blocks if block]
