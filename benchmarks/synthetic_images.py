"""Images made for benchmarks, from a random.Random so that a seed rebuilds them byte for byte:
photo-like copies of an image (as a phone photo or a screenshot of it would be) and scanned-looking
pages of printed text (varied fonts, sizes, paper, noise, blur and a slight rotation)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageFont

# DejaVu and STIX ship inside matplotlib (a dependency), so every machine renders the same glyphs.
FONT_NAMES = ("DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf", "DejaVuSans-Bold.ttf",
              "DejaVuSerif-Italic.ttf", "STIXGeneral.ttf")
PAPERS = ("#ffffff", "#f8f5ec", "#f1ede1", "#fbfbf3", "#eeeeee")
INKS = ("#000000", "#1a1a1a", "#262633", "#2b2118")


def font_files() -> list[Path]:
    import matplotlib

    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    found = [folder / name for name in FONT_NAMES if (folder / name).is_file()]
    if not found:
        raise SystemExit(f"No fonts found in {folder}: reinstall matplotlib (requirements.txt).")
    return found


def photo_like(original: Image.Image, rng: random.Random) -> Image.Image:
    """The image resized, cropped at its edges, brightened or darkened and slightly rotated."""
    image = original.convert("RGB")
    image = image.resize((int(image.width * rng.uniform(0.5, 1.5)), int(image.height * rng.uniform(0.5, 1.5))))
    dx, dy = int(image.width * rng.uniform(0, 0.08)), int(image.height * rng.uniform(0, 0.08))
    image = image.crop((dx, dy, image.width - dx, image.height - dy))
    image = ImageEnhance.Brightness(image).enhance(rng.uniform(0.85, 1.15))
    return image.rotate(rng.uniform(-3, 3), expand=False, fillcolor=(255, 255, 255))


def wrap_words(text: str, font: ImageFont.FreeTypeFont, width: int) -> list[str]:
    """Lines of whole words, each at most `width` pixels wide in `font` (a longer word stands alone)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        candidate = f"{line} {word}".strip()
        if line and font.getlength(candidate) > width:
            lines.append(line)
            line = word
        else:
            line = candidate
    return lines + ([line] if line else [])


def with_noise(image: Image.Image, sigma: float, weight: float, rng: random.Random) -> Image.Image:
    """The image blended with grey Gaussian noise (from `rng`: Pillow's own noise ignores the seed)."""
    generator = np.random.default_rng(rng.getrandbits(64))
    grey = np.clip(generator.normal(128.0, sigma, (image.height, image.width)), 0, 255).astype(np.uint8)
    return Image.blend(image, Image.fromarray(grey).convert("RGB"), weight)


def scanned_page(heading: str, text: str, rng: random.Random, fonts: list[Path]) -> Image.Image:
    """A printed page: the heading in a larger size, then the text, on paper, as a scanner sees it."""
    font_path = rng.choice(fonts)
    size = rng.randint(20, 30)
    body = ImageFont.truetype(str(font_path), size)
    title = ImageFont.truetype(str(font_path), int(size * 1.4))
    width = rng.randint(1000, 1400)
    margin = rng.randint(40, 90)
    lines = wrap_words(text, body, width - 2 * margin)
    spacing = int(size * rng.uniform(1.3, 1.6))
    height = 2 * margin + int(size * 2.4) + spacing * len(lines)
    paper = rng.choice(PAPERS)
    page = Image.new("RGB", (width, height), paper)
    draw = ImageDraw.Draw(page)
    ink = rng.choice(INKS)
    draw.text((margin, margin), heading, font=title, fill=ink)
    y = margin + int(size * 2.4)
    for line in lines:
        draw.text((margin, y), line, font=body, fill=ink)
        y += spacing
    page = with_noise(page, rng.uniform(20, 60), rng.uniform(0.04, 0.12), rng)
    if rng.random() < 0.5:
        page = page.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 0.8)))
    return page.rotate(rng.uniform(-1.5, 1.5), expand=True, fillcolor=paper, resample=Image.Resampling.BICUBIC)
