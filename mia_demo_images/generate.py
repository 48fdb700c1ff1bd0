"""Draw the demo flag images and write titles.json (run once; the PNGs are committed)."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw

OUT = Path(__file__).resolve().parent / "src" / "mia_demo_images"
WIDTH, HEIGHT = 120, 80

BLUE, WHITE, RED = (0, 85, 164), (255, 255, 255), (239, 65, 53)
GREEN, BLACK, GOLD = (0, 146, 70), (0, 0, 0), (255, 206, 0)
ORANGE, YELLOW, SKY = (255, 136, 62), (253, 218, 36), (0, 91, 187)


def stripes(colours: list[tuple[int, int, int]], *, vertical: bool) -> Image.Image:
    image = Image.new("RGB", (WIDTH, HEIGHT))
    draw = ImageDraw.Draw(image)
    count = len(colours)
    for n, colour in enumerate(colours):
        if vertical:
            draw.rectangle([n * WIDTH // count, 0, (n + 1) * WIDTH // count, HEIGHT], fill=colour)
        else:
            draw.rectangle([0, n * HEIGHT // count, WIDTH, (n + 1) * HEIGHT // count], fill=colour)
    return image


def disc(background: tuple[int, int, int], colour: tuple[int, int, int], *, centre_x: float = 0.5) -> Image.Image:
    image = Image.new("RGB", (WIDTH, HEIGHT), background)
    radius, x, y = HEIGHT * 0.3, WIDTH * centre_x, HEIGHT / 2
    ImageDraw.Draw(image).ellipse([x - radius, y - radius, x + radius, y + radius], fill=colour)
    return image


def nordic_cross(background: tuple[int, int, int], colour: tuple[int, int, int]) -> Image.Image:
    image = Image.new("RGB", (WIDTH, HEIGHT), background)
    draw = ImageDraw.Draw(image)
    bar = HEIGHT // 5
    draw.rectangle([WIDTH * 0.3, 0, WIDTH * 0.3 + bar, HEIGHT], fill=colour)
    draw.rectangle([0, (HEIGHT - bar) / 2, WIDTH, (HEIGHT + bar) / 2], fill=colour)
    return image


def square_cross(background: tuple[int, int, int], colour: tuple[int, int, int]) -> Image.Image:
    image = Image.new("RGB", (WIDTH, HEIGHT), background)
    draw = ImageDraw.Draw(image)
    arm, long = HEIGHT // 6, HEIGHT * 0.6
    x, y = WIDTH / 2, HEIGHT / 2
    draw.rectangle([x - arm / 2, y - long / 2, x + arm / 2, y + long / 2], fill=colour)
    draw.rectangle([x - long / 2, y - arm / 2, x + long / 2, y + arm / 2], fill=colour)
    return image


FLAGS = {
    "france.png": ("Flag of France", lambda: stripes([BLUE, WHITE, RED], vertical=True)),
    "italy.png": ("Flag of Italy", lambda: stripes([GREEN, WHITE, RED], vertical=True)),
    "ireland.png": ("Flag of Ireland", lambda: stripes([GREEN, WHITE, ORANGE], vertical=True)),
    "belgium.png": ("Flag of Belgium", lambda: stripes([BLACK, GOLD, RED], vertical=True)),
    "germany.png": ("Flag of Germany", lambda: stripes([BLACK, RED, GOLD], vertical=False)),
    "netherlands.png": ("Flag of the Netherlands", lambda: stripes([RED, WHITE, BLUE], vertical=False)),
    "russia.png": ("Flag of Russia", lambda: stripes([WHITE, BLUE, RED], vertical=False)),
    "austria.png": ("Flag of Austria", lambda: stripes([RED, WHITE, RED], vertical=False)),
    "poland.png": ("Flag of Poland", lambda: stripes([WHITE, RED], vertical=False)),
    "ukraine.png": ("Flag of Ukraine", lambda: stripes([SKY, YELLOW], vertical=False)),
    "japan.png": ("Flag of Japan", lambda: disc(WHITE, RED)),
    "bangladesh.png": ("Flag of Bangladesh", lambda: disc(GREEN, RED, centre_x=0.45)),
    "sweden.png": ("Flag of Sweden", lambda: nordic_cross(SKY, YELLOW)),
    "denmark.png": ("Flag of Denmark", lambda: nordic_cross(RED, WHITE)),
    "finland.png": ("Flag of Finland", lambda: nordic_cross(WHITE, BLUE)),
    "switzerland.png": ("Flag of Switzerland", lambda: square_cross(RED, WHITE)),
}


def main() -> None:
    images = OUT / "images"
    images.mkdir(parents=True, exist_ok=True)
    for name, (_, draw) in FLAGS.items():
        draw().save(images / name, optimize=True)
    titles = {name: title for name, (title, _) in FLAGS.items()}
    (images / "titles.json").write_text(json.dumps(titles, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {len(FLAGS)} images to {images}")


if __name__ == "__main__":
    main()
