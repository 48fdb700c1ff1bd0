"""Image questions in headless Chromium: the research page shows what the assistant saw of the image
(a thumbnail, the text OCR read, the caption and where it came from) and never the upload's temporary
path; the downloaded report says the same. Tiny random model in every role: what the page shows is
asserted, not what the model answers."""

from __future__ import annotations

import shutil

import pytest
from playwright.sync_api import expect

from app.image_view import NO_CAPTION, OCR_LABEL
from tests.app.conftest import login

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("tesseract") is None, reason="needs Debian's tesseract-ocr (CI installs it)"),
]


def notice(path) -> str:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (1100, 260), "white")
    draw = ImageDraw.Draw(image)
    draw.text((20, 30), "HARBOUR OF VELLMARK", fill="black", font=ImageFont.load_default(size=48))
    draw.text((20, 140), "TARIFF 2025: 17 CROWNS PER TONNE", fill="black", font=ImageFont.load_default(size=48))
    image.save(path)
    return str(path)


def ask_with_image(page, image: str, question: str) -> str:
    """Uploads `image`, asks `question`, waits for the run to end; returns the answer box's text."""
    page.locator("#image input[type=file]").set_input_files(image)
    page.locator("#image").get_by_text(image.rsplit("/", 1)[-1]).first.wait_for()  # the upload has landed
    page.locator("#question textarea, #question input").first.fill(question)
    page.locator("#ask").click()
    page.locator("#trace").get_by_text("📊 Run summary").wait_for(timeout=120_000)
    return page.locator("#answer-box").inner_text()


def upload_path(ctx, user: str) -> str:
    """Where the server kept the latest upload: the path the run log names (a temporary folder)."""
    run = ctx.runtime.runlog.list_runs(user, limit=1)[0]
    started = ctx.runtime.runlog.load(user, run.run_id)[0]
    assert started.image and "/" in started.image
    return started.image


def assert_no_path(page, path: str) -> None:
    """Neither the upload's path nor its folder in the page's visible text, nor anywhere in the answer
    box's and the trace's HTML. (Gradio's own file widget links the upload back to its uploader by
    its served address, in an href; that is not the page's text.)"""
    folder = path.rsplit("/", 1)[0]
    shown = [page.locator("body").inner_text(), page.locator("#answer-box").inner_html(),
             page.locator("#trace").inner_html()]
    for text in shown:
        assert path not in text and folder not in text


def test_a_notice_image_shows_its_ocr_text_thumbnail_and_no_caption_and_the_report_has_them(
        app_server, new_page, tmp_path):
    url, ctx = app_server
    page = new_page()
    login(page, url, "carol")
    box = ask_with_image(page, notice(tmp_path / "notice.png"), "What tariff per tonne does the notice in this image state?")

    assert f"{OCR_LABEL}:" in box
    ocr = page.locator("#answer-box .image-ocr").inner_text().upper()
    assert "VELLMARK" in ocr and "17 CROWNS PER TONNE" in ocr
    assert NO_CAPTION in box  # nothing in the image index looks like a printed notice
    assert "notice.png" in box
    thumb = page.locator("#answer-box img.image-thumb")
    assert thumb.get_attribute("src").startswith("data:image/jpeg;base64,")
    assert thumb.evaluate("img => img.complete && img.naturalWidth > 0 && img.naturalWidth <= 192")
    # An answer appears (whatever the tiny model made of it), and the run is over.
    expect(page.locator('#answer-box .answer-box[data-state="final"] .answer-text')).to_be_visible()

    path = upload_path(ctx, "carol")
    started = ctx.runtime.runlog.load("carol", ctx.runtime.runlog.list_runs("carol", limit=1)[0].run_id)[0]
    assert "17 CROWNS PER TONNE" in started.image_text.upper()  # the run log keeps the OCR text
    for line in page.locator("#trace summary").all():  # every step open: its arguments shown too
        line.click()
    assert_no_path(page, path)
    # the guided Executor searches the image index first: the step names the file, never its path,
    # and no indexed image is alike enough for its title to reach the model
    trace = page.locator("#trace").inner_text()
    assert "image_search “your image (notice.png)”" in trace
    assert "image_search “your image (notice.png)” → no passages" in trace and "Flag of" not in trace

    with page.expect_download() as download:
        page.locator("#download-report").click()
    report = tmp_path / download.value.suggested_filename
    download.value.save_as(report)
    text = report.read_text(encoding="utf-8")
    section = text.split("## Your image", 1)[1].split("## Answer", 1)[0]
    assert "- File: notice.png" in section and f"- {OCR_LABEL}:" in section
    assert "17 CROWNS PER TONNE" in section.upper()
    assert path not in text and path.rsplit("/", 1)[0] not in text


def test_a_flag_from_the_image_index_is_captioned_with_its_similarity(app_server, new_page, tmp_path):
    from backend.tools.image_index import demo_images_dir

    folder = demo_images_dir()
    if folder is None:
        pytest.skip("the mia-demo-images package is not installed")
    flag = tmp_path / "france.png"
    shutil.copy(folder / "france.png", flag)
    url, ctx = app_server
    page = new_page()
    login(page, url, "bob")
    box = ask_with_image(page, str(flag), "Which country's flag is this?")

    assert "looks like: Flag of France (image index, similarity 1.00)" in box
    assert "france.png" in box
    assert page.locator("#answer-box img.image-thumb").get_attribute("src").startswith("data:image/jpeg;base64,")
    expect(page.locator('#answer-box .answer-box[data-state="final"] .answer-text')).to_be_visible()
    for line in page.locator("#trace summary").all():
        line.click()
    assert_no_path(page, upload_path(ctx, "bob"))
    trace = page.locator("#trace").inner_text()
    assert "image_search “your image (france.png)”" in trace
