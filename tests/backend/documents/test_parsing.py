"""Each format is read with where its text stands (PDF page, the heading above it); passages stay
within one page or heading and are cut to what the embedder reads; names from outside are cleaned."""

from __future__ import annotations

import pytest

from backend.documents import DocumentError, Locator, ParseError, parse_file
from backend.documents.naming import collection_name, file_name, namespace_folder
from backend.documents.parsing import ParsedFile, Section
from backend.documents.passages import MAX_CHARS, DocPassage, split_passages

from .conftest import FACT


def texts(parsed):
    return [(section.page, section.heading, " ".join(section.paragraphs)) for section in parsed.sections]


def test_a_pdf_is_read_page_by_page(sample_dir):
    parsed = parse_file(sample_dir / "report.pdf")
    assert parsed.format == "pdf" and parsed.pages == 3 and parsed.ocr_pages == 0
    pages = texts(parsed)
    assert [page for page, _, _ in pages] == [1, 2, 3]
    assert "412 ships" in pages[1][2] and "412 ships" not in pages[0][2] + pages[2][2]
    passages = split_passages(parsed)
    assert {p.page for p in passages if "breakwater" in p.text} == {3}
    assert passages[1].title("report.pdf") == "report.pdf p. 2"


def test_markdown_sections_follow_its_headings_not_code(sample_dir):
    parsed = parse_file(sample_dir / "notes" / "reactors.md")
    sections = texts(parsed)
    assert [heading for _, heading, _ in sections] == [None, "Reactors", "Later years"]
    assert FACT in sections[1][2]
    assert "# a comment in code, not a heading" in sections[2][2]  # a fenced block is text under its heading
    assert split_passages(parsed)[1].title("notes/reactors.md") == "notes/reactors.md § Reactors"


def test_html_sections_drop_scripts_and_navigation(sample_dir):
    parsed = parse_file(sample_dir / "field.html")
    sections = texts(parsed)
    assert sections == [(None, None, "Opening remarks."),
                        (None, "Birds of the estuary", "Avocets nest on the mudflats in April."),
                        (None, "Waders", "Curlews feed at low tide.")]
    assert "alert" not in str(sections) and "Home | About" not in str(sections)


def test_docx_sections_follow_heading_styles_and_keep_tables(sample_dir):
    parsed = parse_file(sample_dir / "board.docx")
    sections = texts(parsed)
    assert [heading for _, heading, _ in sections] == [None, "Budget", "Schedule"]
    assert "5 million euros" in sections[1][2] and "Shelving | 1.2 million" in sections[1][2]
    assert sections[2][2] == "Building starts in March."


def test_plain_text_is_cut_at_blank_lines(sample_dir):
    parsed = parse_file(sample_dir / "plain.txt")
    assert parsed.sections[0].paragraphs == ["First paragraph about kittens.", "Second paragraph about puppies."]
    assert split_passages(parsed)[0].title("plain.txt") == "plain.txt"


@pytest.mark.parametrize("name, content, why", [
    ("broken.pdf", b"%PDF-1.7\n" + b"\x00garbage" * 50, "broken.pdf: "),
    ("fake.pdf", b"hello, I am text", "not a PDF file"),
    ("fake.docx", b"not a zip archive", "not a DOCX file"),
    ("binary.txt", b"\x00\x01\x02" * 100, "not a text file"),
    ("empty.md", b"   \n\n", "no text found"),
    ("picture.png", b"\x89PNG", "unsupported format"),
])
def test_a_file_that_cannot_be_read_is_a_parse_error_naming_it(tmp_path, name, content, why):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ParseError) as raised:
        parse_file(path)
    assert str(raised.value).startswith(f"{name}: ") and why in str(raised.value)


def test_passages_stay_within_their_place_and_the_embedders_reach():
    long_paragraph = " ".join(f"Sentence number {n} says something about the harbour." for n in range(80))
    parsed = ParsedFile("pdf", [Section([long_paragraph], page=1), Section(["Short one.", "Short two."], page=2)])
    passages = split_passages(parsed)
    assert all(len(p.text) <= MAX_CHARS for p in passages)
    assert [p.page for p in passages].count(2) == 1 and passages[-1].text == "Short one.\nShort two."
    first_page = " ".join(p.text for p in passages if p.page == 1)
    assert first_page.split() == long_paragraph.split()  # nothing lost, nothing repeated


def test_titles_and_locators_say_where_a_passage_is():
    ocr = DocPassage("text", page=4, ocr=True)
    assert ocr.title("scan.pdf") == "scan.pdf p. 4 (OCR)"
    assert ocr.locator("papers", "scan.pdf") == "doc://papers/scan.pdf#page=4"
    heading = DocPassage("text", heading="Budget & plans")
    url = heading.locator("board", "minutes/2024 board.docx", shared=True)
    assert url == "doc://shared/board/minutes/2024%20board.docx#section=Budget%20%26%20plans"
    place = Locator.parse(url)
    assert (place.shared, place.collection, place.file, place.section) == (True, "board", "minutes/2024 board.docx",
                                                                           "Budget & plans")


@pytest.mark.parametrize("raw", ["../etc", "a/../../b", "..", "/etc/passwd", "C:\\Windows\\x.txt", "a\x00b"])
def test_file_names_that_climb_out_are_refused(raw):
    with pytest.raises(DocumentError):
        file_name(raw)


def test_names_are_cleaned():
    assert file_name("notes\\2024/ Ré<su>mé?.md") == "notes/2024/Ré_su_mé_.md"
    assert file_name(".hidden.txt") == "hidden.txt"
    assert collection_name("  My Papers (2024) ") == "My-Papers-2024"
    assert collection_name("Études") == "Etudes"
    for bad in ("", "   ", "../x", "a/b", "shared", "SHARED"):
        with pytest.raises(DocumentError):
            collection_name(bad)
    assert namespace_folder("alice") == "ns-alice"
    assert namespace_folder("../root").startswith("nsx-") and "/" not in namespace_folder("../root")
    with pytest.raises(DocumentError):
        Locator.parse("doc://papers/../../etc/passwd")
