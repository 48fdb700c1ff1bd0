"""Image-to-image lookup over local folders of titled images (Pillow + numpy, no model).

Each image is described by two features, both in the spirit of perceptual hashing:
- a shape signature: the 63 low-frequency DCT coefficients of a 32x32 grey thumbnail (what pHash
  thresholds into bits; kept as numbers, because on flat-coloured images most coefficients are
  near zero and their bits flip with JPEG noise), compared by cosine;
- a colour layout: the mean colour of each cell of a 6x4 grid (a spatially resolved colour
  histogram; a global histogram cannot tell a flag from its mirror image or a darker copy apart
  from another flag), compared by mean absolute difference.
Similarity is the mean of the two, in [0, 1]. Features are cached per folder set.

A folder may hold `titles.json` (file name -> title); otherwise the title comes from the file name.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError
from tqdm.auto import tqdm

from backend.tools.base import ToolError, ToolSetupError

FEATURE_VERSION = "dct63-layout6x4-v1"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp")
TITLES_FILE = "titles.json"
DEMO_PACKAGE = "mia_demo_images"
MAX_IMAGE_BYTES = 20_000_000
LAYOUT_GRID = (6, 4)  # columns, rows


@dataclass(frozen=True)
class ImageEntry:
    title: str
    path: Path


def demo_images_dir() -> Path | None:
    """The images of the installed `mia-demo-images` package, or None when it is not installed."""
    spec = importlib.util.find_spec(DEMO_PACKAGE)
    if spec is None or spec.origin is None:  # origin None: only a same-named folder, not the package
        return None
    folder = Path(spec.origin).parent / "images"
    return folder if folder.is_dir() else None


class ImageIndex:
    def __init__(self, entries: list[ImageEntry], signatures: np.ndarray, layouts: np.ndarray) -> None:
        self.entries = entries
        self.signatures = signatures  # (n, 63) float32, unit rows
        self.layouts = layouts  # (n, 72) float32 in [0, 1]
        self.built = False

    @classmethod
    def load_or_build(cls, folders: list[Path], cache_dir: Path, *, progress: bool = True) -> ImageIndex:
        entries = list_images(folders)
        if not entries:
            raise ToolSetupError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {', '.join(map(str, folders))}")
        cache_file = Path(cache_dir) / "image_index" / f"{_fingerprint(entries)}.npz"
        if cache_file.is_file():
            with np.load(cache_file) as cached:
                return cls(entries, cached["signatures"], cached["layouts"])
        features = [
            image_features(entry.path)
            for entry in tqdm(entries, desc="Indexing images", unit="image", disable=not progress)
        ]
        index = cls(entries, np.stack([f[0] for f in features]), np.stack([f[1] for f in features]))
        index.built = True
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        temporary = cache_file.with_suffix(f".{uuid.uuid4().hex[:8]}.tmp")
        with temporary.open("wb") as handle:
            np.savez(handle, signatures=index.signatures, layouts=index.layouts)
        os.replace(temporary, cache_file)
        return index

    def search(self, image_path: Path, k: int = 3) -> list[tuple[ImageEntry, float]]:
        signature, layout = image_features(image_path)
        shape_similarity = (1 + self.signatures @ signature) / 2
        colour_similarity = 1 - np.abs(self.layouts - layout).mean(axis=1)
        similarity = (shape_similarity + colour_similarity) / 2
        order = np.argsort(-similarity, kind="stable")[:k]
        return [(self.entries[i], float(similarity[i])) for i in order]


def list_images(folders: list[Path]) -> list[ImageEntry]:
    entries = []
    for folder in folders:
        titles = _titles(folder)
        for path in sorted(Path(folder).iterdir()):
            if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file():
                entries.append(ImageEntry(title=titles.get(path.name) or _title_from_name(path), path=path))
    return entries


def image_features(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(shape signature, colour layout) of the image at `path`; see the module docstring."""
    with _open_image(path) as image:
        rgb = image.convert("RGB")
    grey = np.asarray(rgb.convert("L").resize((32, 32), Image.Resampling.LANCZOS), dtype=np.float32)
    dct = _dct_matrix() @ grey @ _dct_matrix().T
    signature = dct[:8, :8].flatten()[1:]  # the DC term only says how bright the image is
    signature /= max(float(np.linalg.norm(signature)), 1e-6)
    layout = np.asarray(rgb.resize(LAYOUT_GRID, Image.Resampling.BOX), dtype=np.float32).flatten() / 255
    return signature, layout


def _open_image(path: Path) -> Image.Image:
    path = Path(path)
    if not path.is_file():
        raise ToolError(f"there is no image file at {str(path)!r}; give the path of an existing image.")
    if path.stat().st_size > MAX_IMAGE_BYTES:
        raise ToolError(f"{path.name} is larger than {MAX_IMAGE_BYTES // 1_000_000} MB; give a smaller image.")
    try:
        image = Image.open(path)
        image.load()
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, SyntaxError) as problem:
        raise ToolError(f"{path.name} is not a readable image ({type(problem).__name__}); give a PNG or JPEG file.") from problem
    return image


@cache
def _dct_matrix(size: int = 32) -> np.ndarray:
    n = np.arange(size)
    matrix = np.cos(np.pi * (2 * n[None, :] + 1) * n[:, None] / (2 * size)) * np.sqrt(2 / size)
    matrix[0] /= np.sqrt(2)
    return matrix.astype(np.float32)


def _titles(folder: Path) -> dict[str, str]:
    path = Path(folder) / TITLES_FILE
    if not path.is_file():
        return {}
    try:
        titles = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as problem:
        raise ToolSetupError(f"{path} is not valid JSON ({problem}); it must map file names to titles.") from problem
    if not isinstance(titles, dict) or not all(isinstance(value, str) for value in titles.values()):
        raise ToolSetupError(f"{path} must be a JSON object mapping file names to title strings.")
    return titles


def _title_from_name(path: Path) -> str:
    return " ".join(path.stem.replace("_", " ").replace("-", " ").split()).capitalize()


def _fingerprint(entries: list[ImageEntry]) -> str:
    digest = hashlib.sha256(FEATURE_VERSION.encode())
    for entry in entries:
        stat = entry.path.stat()
        digest.update(f"{entry.path.resolve()}|{entry.title}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]
