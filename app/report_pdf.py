"""The run's report as a PDF (fpdf2, with the DejaVu fonts matplotlib ships): the brief first, each
citation [n] a link to its source, each source with its cited sentence in bold in the passage as
retrieved and, for a page of the person's own PDF, that page rendered with the sentence marked; then
the run log as an appendix, the Markdown report's own text.

What came from a model, a page or a document is written as plain text: nothing in it is markup here.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from app.brief import Brief, compose_brief, marked_passage
from app.report import APPENDIX, report_markdown, report_names
from backend.documents.page_image import PageImage
from backend.events import Event, TextDelta
from backend.feedback_queue import FeedbackItem

FONT = "DejaVu"
LINE_MM = 5.5
IMAGE_WIDTH_MM = 120
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_UNESCAPE = re.compile(r"\\([\\`*_\[\]|#<>])")


def _fonts() -> dict[str, Path]:
    import matplotlib

    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    return {"": folder / "DejaVuSans.ttf", "B": folder / "DejaVuSans-Bold.ttf", "I": folder / "DejaVuSans-Oblique.ttf"}


def plain(text: object) -> str:
    """Text as the PDF writes it: control characters dropped (a line break stays)."""
    return _CONTROL.sub("", str(text if text is not None else "").replace("\r", ""))


class _Writer:
    def __init__(self) -> None:
        from fpdf import FPDF

        self.pdf = FPDF(format="A4")
        self.pdf.set_auto_page_break(auto=True, margin=15)
        for style, path in _fonts().items():
            self.pdf.add_font(FONT, style, str(path))
        self.pdf.add_page()
        self.font()

    def font(self, style: str = "", size: float = 10.5) -> None:
        self.pdf.set_font(FONT, style, size)

    def heading(self, text: str, size: float = 13) -> None:
        self.pdf.ln(2)
        self.font("B", size)
        self.pdf.multi_cell(0, LINE_MM + 1.5, plain(text), align="L", new_x="LMARGIN", new_y="NEXT")
        self.font()

    def paragraph(self, text: str, style: str = "") -> None:
        self.font(style)
        self.pdf.multi_cell(0, LINE_MM, plain(text), align="L", new_x="LMARGIN", new_y="NEXT")
        self.font()

    def inline(self, text: str, style: str = "", link: int | None = None) -> None:
        self.font(style)
        if link is None:
            self.pdf.write(LINE_MM, plain(text))
        else:
            self.pdf.set_text_color(20, 80, 200)
            self.pdf.write(LINE_MM, plain(text), link=link)
            self.pdf.set_text_color(0, 0, 0)
        self.font()

    def end_line(self) -> None:
        self.pdf.ln(LINE_MM)

    def gap(self) -> None:
        self.pdf.ln(2)


def report_pdf(events: Sequence[Event], *, feedback: FeedbackItem | None = None,
               follow_ups: Sequence[Sequence[Event]] = (), page_images: Mapping[int, PageImage] | None = None) -> bytes:
    """The report as PDF bytes. `page_images`: by source number [n], the rendered page (sentence marked)
    of a citation of the person's own PDF."""
    events = [e for e in events if not isinstance(e, TextDelta)]
    brief = compose_brief([events, *follow_ups], feedback=feedback)
    markdown = report_markdown(events, feedback=feedback, follow_ups=follow_ups)
    head, _, appendix = markdown.partition(APPENDIX)
    w = _Writer()
    w.heading(head.splitlines()[0].removeprefix("# ").replace("\\", ""), size=16)
    for line in head.splitlines()[1:]:
        if line.startswith("- "):
            w.paragraph(_UNESCAPE.sub(r"\1", line[2:]).replace("`", ""))
        elif line.startswith("## Brief"):
            break
    _brief(w, brief, page_images or {})
    w.pdf.add_page()
    w.heading("Appendix: the run log", size=15)
    for line in appendix.splitlines():
        text = _UNESCAPE.sub(r"\1", line.replace("**", ""))
        if line.startswith("## "):
            w.heading(text[3:], size=12)
        elif line.startswith("### "):
            w.heading(text[4:], size=11)
        elif line.strip():
            w.paragraph(text.replace("   > ", "    │ "))
    return bytes(w.pdf.output())


def _cites(w: _Writer, numbers: Sequence[int], links: Mapping[int, int]) -> None:
    for n in numbers:
        w.inline(" ")
        w.inline(f"[{n}]", link=links.get(n))


def _brief(w: _Writer, brief: Brief, page_images: Mapping[int, PageImage]) -> None:
    links = {source.n: w.pdf.add_link() for source in brief.sources}
    w.heading("Brief")
    w.inline("The question. ", "B")
    w.inline(brief.question or "(no question)")
    w.end_line()
    w.gap()
    w.inline("The answer. ", "B")
    if brief.answer:
        w.inline(brief.answer)
        _cites(w, brief.answer_cites, links)
        w.inline(".")
    else:
        w.inline("None was given.")
    w.end_line()
    if brief.correction:
        w.gap()
        w.inline("A person's correction. ", "B")
        w.inline(brief.correction)
        w.end_line()
    if brief.findings:
        w.gap()
        w.paragraph("How it was found.", "B")
        for number, finding in enumerate(brief.findings, 1):
            w.inline(f"{number}. {finding.text}")
            _cites(w, finding.cites, links)
            w.end_line()
    w.gap()
    w.paragraph("What stays unverified.", "B")
    for item in brief.unverified or ["Nothing: the answer is verified and each finding cited."]:
        w.paragraph(f"• {item}")
    if brief.follow_ups:
        w.gap()
        w.paragraph("Follow-ups.", "B")
        for follow in brief.follow_ups:
            w.inline(f"• {follow.question} → {follow.answer}")
            _cites(w, follow.cites, links)
            w.end_line()
    if not brief.sources:
        return
    w.heading("Cited sources", size=12)
    for source in brief.sources:
        w.pdf.set_link(links[source.n], y=w.pdf.get_y(), page=w.pdf.page)
        w.paragraph(f"[{source.n}] {source.title} ({source.where})", "B")
        if source.sentence:
            w.paragraph(f"Cited: “{source.sentence}”", "I")
        if source.text:
            before, sentence, after = marked_passage(source.text, source.sentence)
            w.inline(before)
            if sentence:
                w.pdf.set_text_color(160, 70, 0)
                w.inline(sentence, "B")
                w.pdf.set_text_color(0, 0, 0)
                w.inline(after)
            w.end_line()
        image = page_images.get(source.n)
        if image is not None:
            w.gap()
            w.pdf.image(io.BytesIO(image.png), w=IMAGE_WIDTH_MM)
            w.paragraph(f"Page {image.page} of {image.pages}" + (", the cited sentence marked." if image.found
                                                                 else ": the sentence is not on its text layer."), "I")
        w.gap()


def write_report_pdf(events: Sequence[Event], folder: Path, *, feedback: FeedbackItem | None = None,
                     follow_ups: Sequence[Sequence[Event]] = (),
                     page_images: Mapping[int, PageImage] | None = None) -> Path:
    """The PDF report written into `folder` beside the Markdown one (same name, .pdf); returns its path."""
    kept = [e for e in events if not isinstance(e, TextDelta)]
    md_name, _ = report_names(kept[0].run_id if kept else "run")
    path = folder / Path(md_name).with_suffix(".pdf").name
    path.write_bytes(report_pdf(kept, feedback=feedback, follow_ups=follow_ups, page_images=page_images))
    return path
