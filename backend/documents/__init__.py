"""The analysts' own documents (PDF, Markdown, plain text, HTML, DOCX): parsed with their positions,
cut into passages, indexed for BM25 and dense search per namespace, and searched by the `search`
tool beside the wiki. One idea per module:

- `parsing`: a file's text by page or heading (pypdf, markdown-it-py, lxml, python-docx);
- `ocr`: text in images by tesseract (image-only PDF pages; a question's image);
- `budget`: what reading one document may cost (pages, OCR calls, passages), refused by a sentence;
- `parse_process`: one document read in a child process with time, memory and CPU-priority limits;
- `passages`: sections cut into passages that know their page or heading;
- `naming`: outside names made safe, and the `doc://` locators of passages;
- `index`: one reader's in-memory BM25 + dense index;
- `store`: collections per namespace on disk, added incrementally by content hash (DocumentStore),
  put together from `store_layout` (scope folders, the write lock, manifests), `store_blobs` (content
  by hash), `store_adding` (adding and re-indexing), `store_reading` (locators and search),
  `store_removal`, `store_records` (what is kept of a file and reported) and `read_turns` (a user's
  reading slots).
"""

from backend.documents.budget import OverBudget
from backend.documents.errors import DocumentError, ParseError
from backend.documents.naming import Locator
from backend.documents.ocr import ocr_available, ocr_status, read_image_text
from backend.documents.parsing import parse_file, supported_suffixes
from backend.documents.store import DocumentStore
from backend.documents.store_records import AddReport, CollectionInfo, DocumentLimits, FileInfo

__all__ = [
    "AddReport", "CollectionInfo", "DocumentError", "DocumentLimits", "DocumentStore", "FileInfo", "Locator",
    "OverBudget", "ParseError", "ocr_available", "ocr_status", "parse_file", "read_image_text", "supported_suffixes",
]
