import json
from collections import Counter
from pathlib import Path

import pytest

from backend.tools.corpus import (
    HOTPOTQA_SOURCE,
    VITAL_SOURCE,
    CorpusError,
    CorpusFiles,
    Document,
    load_documents,
)


@pytest.fixture(scope="module")
def real_files() -> CorpusFiles:
    return CorpusFiles.default()


@pytest.fixture(scope="module")
def real_documents(real_files: CorpusFiles) -> list[Document]:
    return load_documents(real_files)


def test_every_hotpotqa_paragraph_and_vital_summary_becomes_one_document(real_files, real_documents):
    hotpotqa_titles = set()
    for path in real_files.hotpotqa:
        for line in path.read_text(encoding="utf-8").splitlines():
            hotpotqa_titles.update(json.loads(line)["context"]["title"])
    vital = json.loads(real_files.vital_summaries.read_text(encoding="utf-8"))
    vital_titles = {entry["title"] for entry in vital.values() if entry["extract"].strip()}

    titles = [document.title for document in real_documents]
    assert len(titles) == len(set(titles)), "titles must be unique after deduplication"
    assert set(titles) == hotpotqa_titles | vital_titles
    sources = Counter(document.source for document in real_documents)
    assert sources[HOTPOTQA_SOURCE] == len(hotpotqa_titles)
    assert sources[VITAL_SOURCE] == len(vital_titles - hotpotqa_titles)
    assert len(hotpotqa_titles) > 5000 and len(vital_titles) > 9000


def test_hotpotqa_paragraph_text_is_its_sentences_joined(real_files, real_documents):
    record = json.loads(real_files.hotpotqa[0].read_text(encoding="utf-8").splitlines()[0])
    title, sentences = record["context"]["title"][0], record["context"]["sentences"][0]
    document = next(document for document in real_documents if document.title == title)
    assert document.text == "".join(sentences).strip()
    assert "  " not in document.text[:200]


def test_a_title_in_both_sources_keeps_the_hotpotqa_paragraph(tmp_path: Path, write_tiny_corpus):
    files = write_tiny_corpus(
        tmp_path,
        hotpotqa=[Document("Paris", "Paris is the capital of France.", HOTPOTQA_SOURCE)],
        vital=[
            Document("Paris", "A different summary of Paris.", VITAL_SOURCE),
            Document("Rome", "Rome is the capital of Italy.", VITAL_SOURCE),
        ],
    )
    documents = {document.title: document for document in load_documents(files)}
    assert documents["Paris"].text == "Paris is the capital of France."
    assert documents["Paris"].source == HOTPOTQA_SOURCE
    assert documents["Rome"].source == VITAL_SOURCE


def test_fingerprint_follows_file_content(tmp_path: Path, write_tiny_corpus):
    files = write_tiny_corpus(tmp_path, hotpotqa=[Document("A", "alpha text", HOTPOTQA_SOURCE)], vital=[])
    before = files.fingerprint()
    assert files.fingerprint() == before
    files.hotpotqa[0].write_text(files.hotpotqa[0].read_text().replace("alpha", "beta"))
    assert files.fingerprint() != before


def test_missing_or_malformed_files_raise_a_sentence_naming_the_file(tmp_path: Path, write_tiny_corpus):
    missing = CorpusFiles(hotpotqa=(tmp_path / "absent.jsonl",), vital_summaries=None)
    with pytest.raises(CorpusError, match="absent.jsonl"):
        load_documents(missing)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question": "no context here"}\n')
    with pytest.raises(CorpusError, match=r"broken.jsonl:1 .*context"):
        load_documents(CorpusFiles(hotpotqa=(broken,), vital_summaries=None))
