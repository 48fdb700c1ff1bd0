import json
import re
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageEnhance

from backend.tools import build_tools
from backend.tools.base import ToolSetupError
from backend.tools.image_index import ImageIndex, demo_images_dir, list_images
from backend.tools.image_search import ImageSearchTool

DEMO_SOURCE = Path(__file__).resolve().parents[3] / "mia_demo_images" / "src" / "mia_demo_images" / "images"


def perturbed_copies(source: Path, folder: Path) -> list[Path]:
    """The same picture as a user might hold it: rescaled, cropped, darker, all as lossy JPEG."""
    image = Image.open(source).convert("RGB")
    width, height = image.size
    copies = {
        "big": image.resize((width * 3, height * 3), Image.Resampling.BICUBIC),
        "cropped": image.crop((width // 16, height // 16, width - width // 16, height - height // 16)),
        "darker": ImageEnhance.Brightness(image).enhance(0.8),
        "tiny": image.resize((width // 4, height // 4)),
    }
    paths = []
    for name, copy in copies.items():
        path = folder / f"{source.stem}-{name}.jpg"
        copy.save(path, quality=60)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory) -> ImageIndex:
    return ImageIndex.load_or_build([DEMO_SOURCE], tmp_path_factory.mktemp("image-cache"), progress=False)


def test_the_demo_package_is_installed_with_titles():
    folder = demo_images_dir()
    assert folder is not None, "install the seed images: pip install ./mia_demo_images"
    installed = {entry.path.name: entry.title for entry in list_images([folder])}
    assert installed == json.loads((DEMO_SOURCE / "titles.json").read_text())
    assert len(installed) >= 10 and installed["japan.png"] == "Flag of Japan"


def test_perturbed_copies_of_every_demo_image_find_its_title(demo_index, tmp_path):
    titles = json.loads((DEMO_SOURCE / "titles.json").read_text())
    tool = ImageSearchTool(demo_index)
    for name, title in titles.items():
        for copy in perturbed_copies(DEMO_SOURCE / name, tmp_path):
            result = tool({"image": str(copy)})
            assert result.ok, result.error
            assert result.passages[0].title == title, f"{copy.name}: {[p.title for p in result.passages]}"
            assert len(result.passages) == 3
            assert result.passages[0].score > result.passages[1].score


def test_the_answer_lists_three_titles_with_similarities(demo_index, tmp_path):
    copy = perturbed_copies(DEMO_SOURCE / "sweden.png", tmp_path)[0]
    result = ImageSearchTool(demo_index)({"image": str(copy)})
    lines = result.content.splitlines()
    assert lines[0] == "Indexed images most similar to the question's image (similarity 0-1):"  # never its file's name
    assert re.fullmatch(r"\[1\] Flag of Sweden \([01]\.\d\d\)", lines[1])
    assert len(lines) == 4
    assert {passage.source for passage in result.passages} == {"image-index"}


def test_below_the_similarity_a_match_needs_no_title_reaches_the_model(demo_index, tmp_path):
    """A printed notice's nearest indexed image is some flag: neither its title nor a passage comes
    back, only the best similarity; a copy of an indexed flag still finds its title first, the
    nearest others after it."""
    notice = Image.new("RGB", (640, 360), "white")
    draw = ImageDraw.Draw(notice)
    for line, text in enumerate(["Harbour of Vellmark", "Tariff 2025: 17 crowns per tonne", "Landing fees apply"]):
        draw.text((40, 60 + 60 * line), text, fill="black")
    notice.save(tmp_path / "notice.png")
    tool = ImageSearchTool(demo_index, min_similarity=0.92)

    nearest = ImageSearchTool(demo_index)({"image": str(tmp_path / "notice.png")}).passages[0]
    result = tool({"image": str(tmp_path / "notice.png")})
    assert result.ok and result.passages == []
    assert f"the most similar is {nearest.score:.2f} alike, below the 0.92 a match needs" in result.content
    assert "Flag" not in result.content and "notice" not in result.content  # nor the file's name

    flag = tool({"image": str(perturbed_copies(DEMO_SOURCE / "sweden.png", tmp_path)[0])})
    assert flag.passages[0].title == "Flag of Sweden" and "[1] Flag of Sweden" in flag.content
    assert len(flag.passages) == 3


def test_a_users_folder_extends_the_index_and_the_cache_follows_it(tmp_path):
    mine = tmp_path / "my-images"
    mine.mkdir()
    chequered = Image.new("RGB", (120, 80), "white")
    draw = ImageDraw.Draw(chequered)
    for row in range(4):
        for column in range(6):
            if (row + column) % 2:
                draw.rectangle([column * 20, row * 20, column * 20 + 19, row * 20 + 19], fill="black")
    chequered.save(mine / "chequered_racing-flag.png")
    cache = tmp_path / "cache"

    index = ImageIndex.load_or_build([DEMO_SOURCE, mine], cache, progress=False)
    assert index.built and len(index.entries) == len(list_images([DEMO_SOURCE])) + 1
    query = perturbed_copies(mine / "chequered_racing-flag.png", tmp_path)[0]
    assert index.search(query)[0][0].title == "Chequered racing flag"
    assert not ImageIndex.load_or_build([DEMO_SOURCE, mine], cache, progress=False).built

    (mine / "titles.json").write_text(json.dumps({"chequered_racing-flag.png": "Chequered flag"}))
    renamed = ImageIndex.load_or_build([DEMO_SOURCE, mine], cache, progress=False)
    assert renamed.built and renamed.search(query)[0][0].title == "Chequered flag"


def test_bad_images_and_folders_are_explained(demo_index, tmp_path):
    tool = ImageSearchTool(demo_index)
    missing = tool({"image": str(tmp_path / "absent.png")})
    assert not missing.ok and "there is no image file at" in missing.error
    text = tmp_path / "notes.png"
    text.write_text("not really a picture")
    assert "notes.png is not a readable image" in tool({"image": str(text)}).error
    assert "missing argument 'image'" in tool({"path": "x.png"}).error

    (tmp_path / "titles.json").write_text("[not an object]")
    with pytest.raises(ToolSetupError, match="titles.json"):
        ImageIndex.load_or_build([tmp_path], tmp_path / "cache", progress=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ToolSetupError, match="no images"):
        ImageIndex.load_or_build([empty], tmp_path / "cache", progress=False)


def test_build_tools_offers_image_search_over_demo_and_user_images(wiki_index, wiki_cache_dir, tmp_path):
    tools = build_tools(cache_dir=wiki_cache_dir, web_enabled=False, progress=False)
    assert set(tools) == {"search", "image_search"}
    Image.new("RGB", (60, 40), (0, 128, 0)).save(tmp_path / "green.png")
    extended = build_tools(cache_dir=wiki_cache_dir, web_enabled=False, progress=False, image_index_dir=tmp_path)
    titles = [entry.title for entry in extended["image_search"].index.entries]
    assert "Green" in titles and "Flag of Japan" in titles
    with pytest.raises(ToolSetupError, match="is not a folder"):
        build_tools(cache_dir=wiki_cache_dir, web_enabled=False, progress=False, image_index_dir=tmp_path / "nope")
