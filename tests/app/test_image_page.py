"""What the research page and the report show of a question's image (app/image_view.py): a re-encoded
thumbnail, the file's own name and never the upload's temporary path, the caption with its source in
words, and the text OCR read, escaped."""

from __future__ import annotations

import json

import pytest
from PIL import Image, ImageDraw

from app.image_view import (
    IMAGE_GONE, NO_CAPTION, OCR_LABEL, OCR_SHOWN_MAX_CHARS, caption_sentence, image_seen, thumbnail_data_uri,
)
from app.render_html import transcript_of
from app.report import report_markdown, run_json
from backend.events import (
    AnswerReady, RunFinished, RunStarted, StepTaken, ToolCalled, ToolReturned, event_from_dict,
)
from backend.prompts.manager import IMAGE_TEXT_TITLE, LOOKS_LIKE, caption_with_ocr

NOTICE_TEXT = "Harbour of Vellmark\nTariff 2025: 17 crowns per tonne"
HOSTILE_TEXT = "<script>alert('x')</script> [click me](javascript:alert(1)) <img src=x onerror=alert(2)>"


@pytest.fixture
def upload(tmp_path):
    """An uploaded image as Gradio keeps it: a temporary folder named by a hash, the file's own name."""
    folder = tmp_path / "gradio" / "0f3a9c1d2e4b5a6978c0d1e2f3a4b5c6d7e8f9a0"
    folder.mkdir(parents=True)
    path = folder / "notice.png"
    image = Image.new("RGBA", (1200, 500), (255, 255, 255, 255))
    ImageDraw.Draw(image).rectangle((40, 40, 1160, 460), outline=(0, 0, 0, 255), width=8)
    image.save(path)
    return str(path)


def image_run(image: str, *, caption: str | None, source: str | None, image_text: str | None) -> list:
    """A run on an image: the image index searched with the upload's path (as the Executor always
    passes it), the answer citing the OCR passage."""
    steps = {"turn": 1, "think": "", "tool": "image_search", "arguments": {"image": image}, "ok": True,
             "titles": ["Flag of France"], "answer": None, "recovery": None, "format_problems": []}
    return [
        RunStarted("r9", question="What does the tariff say?", namespace="default", image=image, caption=caption,
                   caption_source=source, image_text=image_text, at=100.0),
        ToolCalled("r9", turn=1, name="image_search", arguments={"image": image}, at=101.0),
        ToolReturned("r9", turn=1, name="image_search", ok=True, content="Indexed images most similar to notice.png",
                     passages=[{"title": "Flag of France", "text": "indexed image france.png", "source": "image-index",
                                "score": 0.97, "url": None}], at=102.0),
        StepTaken("r9", step=steps, at=102.5),
        AnswerReady("r9", text="17 crowns per tonne", at=103.0, sources=[
            {"n": 1, "title": IMAGE_TEXT_TITLE, "url": None, "source": "image-ocr",
             "sentence": "Tariff 2025: 17 crowns per tonne"}]),
        RunFinished("r9", answer="17 crowns per tonne", stats={"llm_calls": 2}, at=104.0),
    ]


def notice_run(upload, image_text=NOTICE_TEXT):
    caption = caption_with_ocr(None, image_text)
    return image_run(upload, caption=caption, source="ocr", image_text=image_text)


def page_of(events) -> str:
    page = transcript_of(events)
    return page.answer_html() + page.trace_html()


def test_the_page_shows_the_thumbnail_the_ocr_text_and_the_caption_source_never_the_upload_path(upload):
    html = page_of(notice_run(upload))
    assert '<img class="image-thumb" src="data:image/jpeg;base64,' in html
    assert f"{OCR_LABEL}:" in html
    assert "Harbour of Vellmark\nTariff 2025: 17 crowns per tonne" in html
    assert NO_CAPTION in html  # OCR alone: the image index matched nothing closely enough
    assert "notice.png" in html
    assert upload not in html and "0f3a9c1d2e4b" not in html and "/gradio/" not in html
    assert "image_search “your image (notice.png)”" in html  # the step line names the file, not its path


def test_the_thumbnail_is_small_and_reencoded(upload, tmp_path):
    import base64
    import io

    uri = thumbnail_data_uri(upload)
    data = base64.b64decode(uri.split(",", 1)[1])
    with Image.open(io.BytesIO(data)) as thumb:
        assert thumb.format == "JPEG" and max(thumb.size) <= 192
    assert len(data) <= 40_000
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n not an image")
    assert thumbnail_data_uri(str(broken)) is None
    assert thumbnail_data_uri(str(tmp_path / "gone.png")) is None


def test_a_reopened_run_whose_upload_is_gone_says_so(tmp_path):
    html = page_of(notice_run(str(tmp_path / "gone" / "notice.png")))
    assert IMAGE_GONE in html and "<img" not in html
    assert "Tariff 2025: 17 crowns per tonne" in html


def test_each_caption_source_is_said_in_words(upload):
    looks = LOOKS_LIKE.format(title="Flag of France", similarity=0.97)
    assert "looks like: Flag of France (image index, similarity 0.97)" in page_of(
        image_run(upload, caption=looks, source="image-search", image_text=None))
    with_text = caption_with_ocr(looks, NOTICE_TEXT)
    seen = image_seen(RunStarted("r", question="q", namespace="n", image=upload, caption=with_text,
                                 caption_source="image-search+ocr", image_text=NOTICE_TEXT))
    assert seen.caption_sentence == looks and seen.ocr_text == NOTICE_TEXT
    html = page_of(image_run(upload, caption="a harbour notice", source="user", image_text=None))
    assert "you described it as “a harbour notice”" in html and "No text read in it by OCR." in html
    assert caption_sentence("vision-model", "a red flag") == "a vision model described it as “a red flag”"
    assert caption_sentence(None, None) == NO_CAPTION
    assert NO_CAPTION in page_of(image_run(upload, caption=None, source=None, image_text=None))


def test_an_older_log_without_image_text_shows_the_ocr_text_its_caption_holds(upload):
    looks = LOOKS_LIKE.format(title="Flag of France", similarity=0.97)
    started = RunStarted("r", question="q", namespace="n", image=upload,
                         caption=caption_with_ocr(looks, NOTICE_TEXT), caption_source="image-search+ocr")
    old = event_from_dict({k: v for k, v in started.to_dict().items() if k != "image_text"})
    seen = image_seen(old)
    assert seen.caption_sentence == looks
    assert seen.ocr_text == "Harbour of Vellmark Tariff 2025: 17 crowns per tonne"


def test_a_run_without_an_image_text_logs_as_before():
    assert "image_text" not in RunStarted("r", question="q", namespace="n").to_dict()
    logged = RunStarted("r", question="q", namespace="n", image="/tmp/x.png", image_text="text").to_dict()
    assert logged["image_text"] == "text" and event_from_dict(logged).image_text == "text"


def test_hostile_ocr_text_is_escaped_on_the_page_and_in_the_report(upload):
    events = notice_run(upload, image_text=HOSTILE_TEXT)
    html = page_of(events)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(2)&gt;" in html
    assert '<a href="javascript' not in html
    report = report_markdown(events)
    assert "<script>" not in report and "\\<script\\>" in report
    assert "[click me](javascript" not in report and "\\[click me\\](javascript:alert(1))" in report


def test_long_ocr_text_is_clipped(upload):
    seen = image_seen(RunStarted("r", question="q", namespace="n", image=upload, caption_source="ocr",
                                 caption="x", image_text="word " * 2000))
    assert len(seen.ocr_text) <= OCR_SHOWN_MAX_CHARS and seen.ocr_text.endswith("…")


def test_the_cited_ocr_passage_opens_with_its_text(upload):
    box = transcript_of(notice_run(upload)).answer_html()
    assert "The passage's text is not in this run's events" not in box
    assert "your image, read by OCR" in box


def test_the_report_has_the_image_section_and_no_upload_path(upload):
    events = notice_run(upload)
    report = report_markdown(events)
    assert "## Your image" in report
    assert "- File: notice.png" in report
    assert f"- {NO_CAPTION[:1].upper()}{NO_CAPTION[1:]}" in report
    assert f"- {OCR_LABEL}:\n   > Harbour of Vellmark\n   > Tariff 2025: 17 crowns per tonne" in report
    assert "image\\_search “your image (notice.png)”" in report  # the step names the file
    assert "Passage as retrieved:" in report.split("## Sources", 1)[1]  # the cited OCR passage's text
    assert upload not in report and "0f3a9c1d2e4b" not in report

    looks = LOOKS_LIKE.format(title="Flag of France", similarity=0.97)
    flag = report_markdown(image_run(upload, caption=looks, source="image-search", image_text=None))
    assert "- Looks like: Flag of France (image index, similarity 0.97)" in flag
    user = report_markdown(image_run(upload, caption="a *harbour* notice", source="user", image_text=None))
    assert "- You described it as “a \\*harbour\\* notice”" in user


def test_the_downloaded_run_names_the_file_not_its_path(upload):
    document = run_json(notice_run(upload))
    assert upload not in document and "0f3a9c1d2e4b" not in document
    events = [event_from_dict(e) for e in json.loads(document)["events"]]
    assert events[0].image == "your image (notice.png)"
    assert events[1].arguments == {"image": "your image (notice.png)"}
