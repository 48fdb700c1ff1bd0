"""One page of a user's PDF as a PNG image, with the boxes of a cited sentence marked on it.

PDFium (pypdfium2) renders the page and gives its text layer's character boxes; the sentence is found
in that text (backend.tools.sentence_span) and its boxes are drawn over the page. As with parsing
(backend.documents.parse_process), a user's bytes are never read in the app's process: a child
process renders, niced, with its address space and processor time capped, and is killed at the
deadline; at most RENDERS_AT_ONCE run at a time. A page whose text layer does not hold the sentence (a scan read by OCR) comes back
unmarked, `found` False, and the view highlights the sentence in the page's text instead.
"""

from __future__ import annotations

import io
import math
import multiprocessing
import os
import resource
import signal
import threading
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from backend.config import DocumentsConfig
from backend.documents.errors import DocumentError

RENDER_SECONDS = 20.0  # at most, whatever documents.max_seconds allows
PAGE_WIDTH_PX = 900  # the image's width; its height follows the page's shape
MARK_FILL = (255, 214, 0, 90)
MARK_LINE = (230, 120, 0, 255)
EXIT_GRACE_S = 5.0
RENDERS_AT_ONCE = 2
_RENDERS = threading.BoundedSemaphore(RENDERS_AT_ONCE)

_CONTEXT = multiprocessing.get_context("forkserver")  # the one parse_process uses; a fork of its server


class RenderError(DocumentError):
    """The page could not be rendered; the message says why and what to do."""


@dataclass(frozen=True)
class PageImage:
    png: bytes
    width: int
    height: int
    page: int
    pages: int
    found: bool  # the sentence was found on the page's text layer and is marked
    boxes: list[tuple[int, int, int, int]] = field(default_factory=list)  # (left, top, right, bottom) in pixels


def render_page(path: Path, page: int, sentence: str | None, budget: DocumentsConfig) -> PageImage:
    """Page `page` (1-based) of the PDF at `path`, with `sentence` marked where its text layer holds it.
    Raises RenderError with a sentence saying what happened."""
    seconds = min(RENDER_SECONDS, budget.max_seconds)
    if not _RENDERS.acquire(timeout=seconds):
        raise RenderError(f"Other pages are being rendered; open page {page} again in a moment, or the file itself.")
    try:
        return _render_page(path, page, sentence, budget, seconds)
    finally:
        _RENDERS.release()


def _render_page(path: Path, page: int, sentence: str | None, budget: DocumentsConfig, seconds: float) -> PageImage:
    receiver, sender = _CONTEXT.Pipe(duplex=False)
    child = _CONTEXT.Process(target=_render_in_child, args=(str(path), page, sentence or "", budget, seconds, sender),
                             daemon=True, name=f"render page {page}")
    child.start()
    sender.close()
    try:
        if not receiver.poll(seconds):
            _kill_group(child)
            raise RenderError(f"Rendering page {page} took more than {seconds:g} s; open the file itself instead.")
        try:
            outcome, value = receiver.recv()
        except EOFError:
            child.join(EXIT_GRACE_S)
            _kill_group(child)
            raise RenderError(f"Rendering page {page} stopped (exit code {child.exitcode}): the page needs more than "
                              f"{budget.max_memory_mb:,} MB or is damaged; open the file itself instead.") from None
    finally:
        receiver.close()
    child.join(EXIT_GRACE_S)
    if child.exitcode is None:
        _kill_group(child)
    if outcome != "rendered":
        raise RenderError(value)
    return value


def _kill_group(child) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        child.kill()
    child.join(EXIT_GRACE_S)


def _render_in_child(path: str, page: int, sentence: str, budget: DocumentsConfig, seconds: float,
                     sender: Connection) -> None:
    os.setpgid(0, 0)
    os.nice(budget.worker_nice)
    with open("/proc/self/statm") as handle:
        address_space = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE") + budget.max_memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    cpu = math.ceil(seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    try:
        sender.send(("rendered", _render(Path(path), page, sentence)))
    except RenderError as exc:
        sender.send(("failed", str(exc)))
    except MemoryError:
        sender.send(("failed", "Rendering the page ran out of memory; open the file itself instead."))
    finally:
        sender.close()


def _render(path: Path, page_number: int, sentence: str) -> PageImage:
    import pypdfium2 as pdfium
    from PIL import Image, ImageDraw

    from backend.tools.sentence_span import sentence_span

    try:
        document = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        raise RenderError(f"The PDF cannot be opened ({exc}); add it again, or open the file itself.") from None
    try:
        pages = len(document)
        if not 1 <= page_number <= pages:
            raise RenderError(f"The PDF has {pages} pages, not a page {page_number}; re-index the file.")
        page = document[page_number - 1]
        width_pt, height_pt = page.get_size()
        scale = PAGE_WIDTH_PX / max(width_pt, 1.0)
        image = page.render(scale=scale).to_pil().convert("RGBA")
        boxes: list[tuple[int, int, int, int]] = []
        if sentence:
            textpage = page.get_textpage()
            span = sentence_span(textpage.get_text_range(), sentence)
            if span is not None:
                start, end = span
                for index in range(textpage.count_rects(start, end - start)):
                    left, bottom, right, top = textpage.get_rect(index)
                    boxes.append((int(left * scale) - 2, int((height_pt - top) * scale) - 2,
                                  int(right * scale) + 2, int((height_pt - bottom) * scale) + 2))
        if boxes:
            overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
            draw = ImageDraw.Draw(overlay)
            for box in boxes:
                draw.rectangle(box, fill=MARK_FILL, outline=MARK_LINE, width=2)
            image = Image.alpha_composite(image, overlay)
        out = io.BytesIO()
        image.convert("RGB").save(out, format="PNG", optimize=False)
        return PageImage(png=out.getvalue(), width=image.width, height=image.height, page=page_number, pages=pages,
                         found=bool(boxes), boxes=boxes)
    finally:
        document.close()
