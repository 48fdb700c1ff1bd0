"""How similar an image must be to an image-index entry before that entry's title becomes its caption.

Builds, from a seed, a set of images that are in the index (each demo flag re-encoded as JPEG, resized,
cropped, brightened or darkened and slightly rotated, as a photo or a screenshot of it would be) and
images that are not (printed notices in various fonts and sizes, flags of colours no indexed flag has,
gradients and noise), looks each up in the real image index (backend.tools.image_index), and prints,
per similarity threshold, how many indexed images would be captioned with their right title, how
many with a wrong one, and how many images that are not in the index would get a caption at all.
Choose the threshold on --split train (seed 0); --split dev (seed 1) is the check.

    .venv/bin/python benchmarks/caption_threshold.py --split train
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.tools.image_index import ImageIndex, demo_images_dir, list_images  # noqa: E402
from benchmarks.synthetic_images import photo_like  # noqa: E402

SEEDS = {"train": 0, "dev": 1}
WORDS = ("HARBOUR", "TARIFF", "NOTICE", "CROWNS", "TONNE", "MARKET", "OPENING", "HOURS", "STATION", "FERRY",
         "MUSEUM", "ENTRY", "PRICE", "2025", "17", "PER", "DAY", "CLOSED", "SUNDAY", "VELLMARK")


def indexed_variants(rng: random.Random, folder: Path, out: Path, per_image: int) -> list[tuple[Path, str]]:
    """(image, its title) for variants of each indexed image."""
    cases = []
    for entry in list_images([folder]):
        original = Image.open(entry.path).convert("RGB")
        for n in range(per_image):
            path = out / f"in-{entry.path.stem}-{n}.jpg"
            photo_like(original, rng).save(path, quality=rng.randint(40, 85))
            cases.append((path, entry.title))
    return cases


def outside_images(rng: random.Random, out: Path, count: int) -> list[Path]:
    """Images no indexed entry shows: printed notices, flags of unused colours, gradients, noise."""
    paths = []
    for n in range(count):
        kind = n % 4
        width, height = rng.randint(400, 1200), rng.randint(200, 800)
        if kind == 0:  # a printed notice
            image = Image.new("RGB", (width, height), rng.choice(["white", "#f4f0e6", "#fffbe8"]))
            draw = ImageDraw.Draw(image)
            y = 10
            while y < height - 40:
                line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5)))
                size = rng.randint(18, 48)
                draw.text((rng.randint(5, 40), y), line, fill="black", font=ImageFont.load_default(size=size))
                y += size + rng.randint(6, 20)
        elif kind == 1:  # a flag in colours no indexed flag uses
            colours = [rng.choice(["#7b2d8e", "#f28500", "#40e0d0", "#8b4513", "#ff69b4", "#556b2f"]) for _ in range(3)]
            image = Image.new("RGB", (width, height))
            draw = ImageDraw.Draw(image)
            for i, colour in enumerate(colours):
                draw.rectangle([0, i * height // 3, width, (i + 1) * height // 3], fill=colour)
        elif kind == 2:  # a gradient
            image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
        else:  # noise
            image = Image.effect_noise((width, height), rng.uniform(20, 90)).convert("RGB")
        path = out / f"out-{n}.jpg"
        image.save(path, quality=80)
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=tuple(SEEDS), default="train")
    parser.add_argument("--per-image", type=int, default=6, help="variants of each indexed image")
    parser.add_argument("--outside", type=int, default=100, help="images that are not in the index")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.80, 0.85, 0.88, 0.90, 0.92, 0.94, 0.96])
    args = parser.parse_args()
    folder = demo_images_dir()
    if folder is None:
        raise SystemExit("The mia-demo-images package is not installed: run `make install` first.")
    rng = random.Random(SEEDS[args.split])
    with tempfile.TemporaryDirectory() as tmp:
        index = ImageIndex.load_or_build([folder], Path(tmp) / "cache", progress=False)
        inside = indexed_variants(rng, folder, Path(tmp), args.per_image)
        outside = outside_images(rng, Path(tmp), args.outside)
        best_inside = [(index.search(path, k=1)[0], title) for path, title in inside]
        best_outside = [index.search(path, k=1)[0][1] for path in outside]
    print(f"split {args.split}: {len(inside)} variants of {len(inside) // args.per_image} indexed images, "
          f"{len(outside)} images not in the index")
    print("| threshold | indexed, right title | indexed, wrong title | not indexed, captioned |")
    print("|---|---|---|---|")
    for threshold in args.thresholds:
        right = sum(score >= threshold and entry.title == title for (entry, score), title in best_inside)
        wrong = sum(score >= threshold and entry.title != title for (entry, score), title in best_inside)
        false = sum(score >= threshold for score in best_outside)
        print(f"| {threshold:.2f} | {right}/{len(inside)} | {wrong} | {false}/{len(outside)} |")


if __name__ == "__main__":
    main()
