"""Seed images for the MIA `image_search` tool: simple flags drawn with Pillow (see generate.py)."""

from pathlib import Path

IMAGES_DIR = Path(__file__).resolve().parent / "images"
TITLES_FILE = IMAGES_DIR / "titles.json"


def images_dir() -> Path:
    """The folder holding the PNG files; its titles.json maps file name -> title."""
    return IMAGES_DIR
