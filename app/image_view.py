"""What the assistant saw of a question's image, as the research page and the report show it: the
file's own name (never the upload's temporary path), a small thumbnail re-encoded by Pillow as a data
URI, the caption in words with where it came from, and the text OCR read in it.

All of it comes from the run's RunStarted event (backend.episode): `caption` and `caption_source`
("user" | "image-search" | "vision-model" | None, "+ocr" when OCR read text, the caption then ending in
the OCR text), and `image_text`, the OCR text itself (absent from runs logged before it was kept: then
it is taken from the caption, where its first characters are). The text is data, escaped by whoever
renders it.
"""

from __future__ import annotations

import base64
import io
import os
import re
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from backend.events import RunStarted
from backend.inputs import MAX_IMAGE_PIXELS
from backend.prompts.manager import OCR_CAPTION, OCR_MAX_CHARS, OCR_ONLY_CAPTION

OCR_LABEL = "Text in your image (read by OCR)"
NO_OCR_TEXT = "No text read in it by OCR."
NO_CAPTION = "no caption: the image matched nothing in the image index closely enough"
IMAGE_GONE = "The image is no longer kept on the server."
YOUR_IMAGE = "your image"
OCR_SHOWN_MAX_CHARS = 2000  # the OCR text on the page and in the report (the Executor's passage holds up to 4000)
NAME_MAX_CHARS = 80

THUMB_SIDE = 192  # the thumbnail's longer side, in pixels
THUMB_MAX_BYTES = 40_000  # its JPEG, else no thumbnail
THUMB_MAX_FILE_BYTES = 64_000_000  # a file larger than this is not opened for a thumbnail

# OCR_CAPTION is "{caption} (text in the image, by OCR: {text})": the words between the two.
_OCR_MARKER = OCR_CAPTION.split("{caption}", 1)[1].split("{text}", 1)[0]
_OCR_ONLY_PREFIX = OCR_ONLY_CAPTION.split("{text}", 1)[0]


def image_name(path: str | None) -> str:
    """The image file's own name (an upload keeps it as the last part of its path), clipped; never
    the folders it sits in. 'your image' when there is none."""
    name = re.sub(r"\s+", " ", Path(str(path or "")).name).strip()
    if not name:
        return YOUR_IMAGE
    return name if len(name) <= NAME_MAX_CHARS else name[: NAME_MAX_CHARS - 1] + "…"


def image_label(path: str | None) -> str:
    """'your image (flag.png)': how a tool call on the uploaded image names it."""
    name = image_name(path)
    return YOUR_IMAGE if name == YOUR_IMAGE else f"{YOUR_IMAGE} ({name})"


def without_image_path(value: Any, image: str | None) -> Any:
    """`value` (a tool call's arguments, a step, an event's dict) with every string that is the
    uploaded image's path replaced by image_label: the Executor always passes the upload's own path
    to an image tool, and the page, the report and the downloaded run show the file's name instead."""
    if not image:
        return value
    if isinstance(value, str):
        if value == image:
            return image_label(image)
        # inside a longer text, only a path with folders (a bare file name is the name shown anyway)
        return value.replace(image, image_label(image)) if "/" in image or os.sep in image else value
    if isinstance(value, dict):
        return {key: without_image_path(item, image) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(without_image_path(item, image) for item in value)
    return value


@dataclass(frozen=True)
class ImageSeen:
    """What a run saw of its image: the file's name, the caption as a sentence with its source, and
    the OCR text ('' when none was read)."""

    path: str
    name: str
    caption_sentence: str
    ocr_text: str
    ocr_clipped: bool = False


def _split_caption(started: RunStarted) -> tuple[str | None, str]:
    """(the caption without the OCR text appended to it, the OCR text)."""
    caption, source = started.caption or None, started.caption_source or ""
    text = started.image_text or ""
    if not source.endswith("ocr") or caption is None:
        return caption, text
    if source == "ocr":  # the caption is the OCR text alone
        if not text and caption.startswith(_OCR_ONLY_PREFIX):
            text = caption[len(_OCR_ONLY_PREFIX):]
        return None, text
    if text:
        suffix = OCR_CAPTION.format(caption="", text=" ".join(text.split())[:OCR_MAX_CHARS])
        if caption.endswith(suffix):
            return caption[: -len(suffix)], text
    description, marker, rest = caption.partition(_OCR_MARKER)
    if not marker:
        return caption, text
    return description, text or rest.removesuffix(")")


def caption_sentence(source: str | None, description: str | None) -> str:
    """The caption and where it came from, in words."""
    base = (source or "").removesuffix("+ocr")
    if not description or base in ("", "ocr"):
        return NO_CAPTION
    if base == "user":
        return f"you described it as “{description}”"
    if base == "vision-model":
        return f"a vision model described it as “{description}”"
    if base == "image-search":
        return description  # "looks like: Flag of France (image index, similarity 0.97)"
    return f"{description} (from {base})"


def image_seen(started: RunStarted | None) -> ImageSeen | None:
    """What the run saw of its image; None for a run without one."""
    if started is None or not started.image:
        return None
    description, text = _split_caption(started)
    text = text.strip()
    clipped = len(text) > OCR_SHOWN_MAX_CHARS
    if clipped:
        text = text[: OCR_SHOWN_MAX_CHARS - 1].rstrip() + "…"
    return ImageSeen(path=started.image, name=image_name(started.image),
                     caption_sentence=caption_sentence(started.caption_source, description),
                     ocr_text=text, ocr_clipped=clipped)


def image_passage(started: RunStarted | None) -> dict | None:
    """The OCR text as the Executor's session held it (backend.prompts.manager.image_text_passage),
    so that a citation of it finds its text; None when no text was kept."""
    if started is None or not started.image_text:
        return None
    from backend.prompts.manager import image_text_passage

    return image_text_passage(started.image_text)


# -- the thumbnail -----------------------------------------------------------------------------------
def thumbnail_data_uri(path: str | None) -> str | None:
    """A small JPEG of the image (longer side THUMB_SIDE, at most THUMB_MAX_BYTES) as a data URI,
    re-encoded by Pillow so that nothing of the file but its pixels reaches the page; None when the
    file is gone, too large or not an image."""
    if not path:
        return None
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    if not os.path.isfile(path) or info.st_size > THUMB_MAX_FILE_BYTES:
        return None
    return _thumbnail(str(path), info.st_mtime_ns, info.st_size)


@lru_cache(maxsize=32)
def _thumbnail(path: str, mtime_ns: int, size: int) -> str | None:
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                width, height = image.size
                if width * height > MAX_IMAGE_PIXELS:
                    return None
                image.draft("RGB", (THUMB_SIDE * 2, THUMB_SIDE * 2))  # JPEG: decode at a smaller scale
                image = ImageOps.exif_transpose(image)
                if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
                    rgba = image.convert("RGBA")
                    flat = Image.new("RGB", rgba.size, "white")
                    flat.paste(rgba, mask=rgba.getchannel("A"))
                    image = flat
                else:
                    image = image.convert("RGB")
                image.thumbnail((THUMB_SIDE, THUMB_SIDE), Image.Resampling.LANCZOS)
                for quality in (85, 60):
                    out = io.BytesIO()
                    image.save(out, "JPEG", quality=quality, optimize=True)
                    data = out.getvalue()
                    if len(data) <= THUMB_MAX_BYTES:
                        return "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, SyntaxError, ValueError):
        return None
    return None
