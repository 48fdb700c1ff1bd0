import pytest
from PIL import Image

from backend.inputs import InputError, validate_image, validate_question


def test_question_is_trimmed():
    assert validate_question("  Who?  ", 100) == "Who?"


@pytest.mark.parametrize("question", ["", "   ", None])
def test_empty_question_is_refused(question):
    with pytest.raises(InputError, match="empty"):
        validate_question(question, 100)


def test_overlong_question_is_refused_with_the_limit():
    with pytest.raises(InputError, match="4,000"):
        validate_question("x" * 4001, 4000)


def test_real_image_passes_and_fake_image_is_refused(tmp_path):
    good = tmp_path / "flag.png"
    Image.new("RGB", (8, 8), "red").save(good)
    assert validate_image(good, 10_000) == str(good)
    bad = tmp_path / "notes.png"
    bad.write_text("this is not an image")
    with pytest.raises(InputError, match="not an image"):
        validate_image(bad, 10_000)


def test_oversized_and_missing_images_are_refused(tmp_path):
    big = tmp_path / "big.png"
    Image.new("RGB", (64, 64), "blue").save(big)
    with pytest.raises(InputError, match="limit"):
        validate_image(big, 10)
    with pytest.raises(InputError, match="not found"):
        validate_image(tmp_path / "absent.png", 10_000)
    assert validate_image(None, 10) is None


def bilevel_png(path, width: int, height: int):
    """A real, valid PNG of width x height black pixels that is only kilobytes on disk."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    packer = zlib.compressobj(9)
    row = bytes(1 + (width + 7) // 8)  # filter byte, then 1 bit per pixel
    pixels = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b""))
    return path


@pytest.mark.parametrize("width, height, message", [
    (20_000, 20_000, "far more than 40 million pixels"),  # past Pillow's own decompression-bomb limit
    (7_000, 7_000, "is 7000 x 7000 pixels; the limit is 40 million pixels"),  # under Pillow's, over ours
])
def test_images_with_too_many_pixels_are_refused_whatever_their_file_size(tmp_path, width, height, message):
    image = bilevel_png(tmp_path / "wide.png", width, height)
    assert image.stat().st_size < 200_000
    with pytest.raises(InputError, match=message):
        validate_image(image, 10_000_000)


def test_terminal_escapes_and_control_characters_are_taken_out_of_questions():
    raw = "Who \x1b[31mwrote\x1b[0m Hamlet?\x07\x1b]0;owned\x07\r\nand when\x00\x9b?"
    assert validate_question(raw, 200) == "Who wrote Hamlet?\nand when?"
    assert validate_question("\ttabs\tstay", 200) == "tabs\tstay"
    with pytest.raises(InputError, match="empty"):
        validate_question("\x1b[2J\x1b[H\x08", 200)
