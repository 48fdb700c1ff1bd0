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
