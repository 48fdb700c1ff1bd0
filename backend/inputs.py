"""Checks on what a user hands the agent: the question and an optional image."""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """The user's input cannot be used; the message says what to change."""


def validate_question(question: str | None, max_chars: int) -> str:
    text = (question or "").strip()
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
        with Image.open(file) as image:
            image.verify()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise InputError(
            f"{file.name} is not an image that can be read ({type(exc).__name__}); upload a PNG, JPEG, GIF or WebP file."
        ) from None
    return str(file)
