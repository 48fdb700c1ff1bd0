"""Text in images, read by the `tesseract` command (Debian: `apt-get install tesseract-ocr`).

No Python wrapper: each image is one `tesseract <image> stdout` subprocess with a timeout. Without
tesseract everything else works; `ocr_available()` says so and `read_image_text` answers None.

For the question image of a run: `read_image_text(path)` gives the text it shows (or None), ready to
add to the caption the Planner sees.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

log = logging.getLogger(__name__)

TIMEOUT_S = 60.0  # one image; a page scanned at 300 dpi takes a few seconds on one core
MAX_PIXELS = 40_000_000  # as for uploaded question images (backend/inputs.py)
MIN_SIDE = 24  # smaller images (icons, rules, bullets) carry no readable text
LANGUAGE = "eng"
INSTALL_HINT = "install it with `sudo apt-get install tesseract-ocr` (Debian/Ubuntu) or `brew install tesseract` (macOS)"
_WORD = re.compile(r"[^\W_]{2,}")


def tesseract_path() -> str | None:
    return shutil.which("tesseract")


def ocr_available() -> bool:
    """Whether images can be read: the `tesseract` command is installed."""
    return tesseract_path() is not None


@lru_cache(maxsize=4)
def _version(path: str) -> str:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    first = (done.stdout or done.stderr).strip().splitlines()
    return first[0] if first else ""


def ocr_status() -> str:
    """One sentence for the UI and the terminal: whether OCR is on, and how to turn it on."""
    path = tesseract_path()
    if path is None:
        return f"OCR is off: tesseract is not installed, so image-only PDF pages are not read; {INSTALL_HINT}."
    version = _version(path)
    return f"OCR is on ({version or 'tesseract'}): image-only PDF pages are read."


def clean_ocr_text(text: str) -> str:
    """Lines that read as text: each with a word of two letters or digits, mostly letters and digits
    (scans of photos and rules give lines such as '| ~ _ .'), whitespace collapsed; a blank line
    between paragraphs is kept."""
    kept: list[str] = []
    for line in text.splitlines():
        line = " ".join(line.split())
        visible = line.replace(" ", "")
        if not visible:
            if kept and kept[-1]:
                kept.append("")  # a paragraph break
            continue
        if not _WORD.search(line) or sum(ch.isalnum() for ch in visible) < 0.5 * len(visible):
            continue
        kept.append(line)
    return "\n".join(kept).strip()


def read_image_text(path: str | Path, *, timeout: float = TIMEOUT_S, language: str = LANGUAGE) -> str | None:
    """The text an image file shows, cleaned (see `clean_ocr_text`; '' when it shows none), or None when
    OCR is off, the file is not an image, is larger than MAX_PIXELS, or tesseract fails or times out."""
    binary = tesseract_path()
    if binary is None:
        return None
    try:
        from PIL import Image

        with Image.open(path) as image:
            width, height = image.size
    except Exception as exc:  # not an image, or unreadable: nothing to read
        log.info("not reading %s: %s", path, exc)
        return None
    if width * height > MAX_PIXELS or min(width, height) < MIN_SIDE:
        return None
    environment = {**os.environ, "OMP_THREAD_LIMIT": "1"}  # tesseract's OpenMP threads spin on a shared CPU
    try:
        done = subprocess.run([binary, str(path), "stdout", "-l", language], capture_output=True, timeout=timeout,
                              env=environment, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        log.warning("tesseract gave up on %s after %.0f s", path, timeout)
        return None
    except OSError as exc:
        log.warning("tesseract could not run: %s", exc)
        return None
    if done.returncode != 0:
        log.warning("tesseract failed on %s: %s", path, done.stderr.decode("utf-8", "replace")[-300:])
        return None
    return clean_ocr_text(done.stdout.decode("utf-8", "replace"))


def read_pil_image_text(image, *, timeout: float = TIMEOUT_S) -> str | None:
    """`read_image_text` for an image already decoded (e.g. one embedded in a PDF page)."""
    if not ocr_available():
        return None
    width, height = image.size
    if width * height > MAX_PIXELS or min(width, height) < MIN_SIDE:
        return None
    if image.mode not in ("1", "L", "RGB"):
        image = image.convert("RGB")
    with tempfile.TemporaryDirectory(prefix="mia-ocr-") as folder:
        path = Path(folder) / "image.png"
        image.save(path, "PNG")
        return read_image_text(path, timeout=timeout)
