"""Checks on what a user hands the agent: the question and an optional image."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

MAX_IMAGE_PIXELS = 40_000_000  # decoding is width x height x 4 bytes, whatever the file's size
# Terminal escape sequences (CSI, OSC, and two-character ESC forms), then any other control
# character but tab and newline: a question is text to research, never commands for a terminal.
TERMINAL_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class InputError(ValueError):
    """The user's input cannot be used; the message says what to change."""


def without_control_characters(text: str) -> str:
    """`text` with terminal escape sequences and control characters removed (tab and newline kept;
    a carriage return becomes a newline)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return CONTROL_CHARACTERS.sub("", TERMINAL_ESCAPES.sub("", text))


def validate_question(question: str | None, max_chars: int) -> str:
    text = without_control_characters(question or "").strip()
    if not text:
        raise InputError("The question is empty: type a question to research.")
    if len(text) > max_chars:
        raise InputError(
            f"The question is {len(text):,} characters long; the limit is {max_chars:,}. "
            "Shorten it to the question itself and leave background out."
        )
    return text


def validate_image(path: str | Path | None, max_bytes: int) -> str | None:
    """The image's path when it is a readable image within the size cap, else InputError."""
    if path is None or str(path) == "":
        return None
    from PIL import Image, UnidentifiedImageError

    file = Path(path)
    if not file.is_file():
        raise InputError(f"The image {file.name} was not found: upload it again.")
    size = file.stat().st_size
    if size > max_bytes:
        raise InputError(
            f"The image is {size / 1e6:.1f} MB; the limit is {max_bytes / 1e6:.1f} MB. Upload a smaller image."
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(file) as image:  # reads the header only; Pillow refuses far larger images itself
                width, height = image.size
                if width * height <= MAX_IMAGE_PIXELS:
                    image.verify()
    except Image.DecompressionBombError:
        width = height = None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise InputError(
            f"{file.name} is not an image that can be read ({type(exc).__name__}); upload a PNG, JPEG, GIF or WebP file."
        ) from None
    limit = f"{MAX_IMAGE_PIXELS / 1e6:.0f} million pixels"
    smaller = "Upload a smaller image (at most 6000 x 6000 pixels, say)."
    if width is None:
        raise InputError(f"{file.name} has far more than {limit}, more than can be decoded safely. {smaller}")
    if width * height > MAX_IMAGE_PIXELS:
        raise InputError(f"{file.name} is {width} x {height} pixels; the limit is {limit}. {smaller}")
    return str(file)
