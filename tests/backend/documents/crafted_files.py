"""Small files crafted to cost a reader much (the documents tests and benchmarks/hostile_documents_bench.py)."""

from __future__ import annotations

import zipfile
from pathlib import Path


def write_blank_image_pdf(path: Path, pages: int, size: tuple[int, int] = (1000, 400)) -> Path:
    """A PDF of `pages` pages that are each one blank picture: no text for OCR to find."""
    from PIL import Image

    blank = [Image.new("L", size, 255) for _ in range(pages)]
    blank[0].save(path, "PDF", resolution=150, save_all=True, append_images=blank[1:])
    return path


def write_long_docx(path: Path, paragraphs: int) -> Path:
    import docx

    document = docx.Document()
    for number in range(paragraphs):
        document.add_paragraph(f"Paragraph {number} of a long report on the harbour's accounts and its ships.")
    document.save(str(path))
    return path


def write_docx_bomb(path: Path, paragraphs: int) -> Path:
    """A small DOCX whose document.xml unpacks to `paragraphs` repeated paragraphs (about 50 bytes each),
    well under the 300 MB a DOCX may unpack to."""
    import docx

    docx.Document().save(str(path))
    with zipfile.ZipFile(path) as archive:
        parts = {member.filename: archive.read(member.filename) for member in archive.infolist()}
    body = "<w:p><w:r><w:t>word word word word</w:t></w:r></w:p>" * paragraphs
    parts["word/document.xml"] = parts["word/document.xml"].replace(b"<w:body>", b"<w:body>" + body.encode(), 1)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return path
