"""The document store on the real embedder: a folder goes in with its unreadable file named, adding
again embeds nothing already indexed, removing and re-indexing change what the search finds, limits
are enforced with a clear error (the quota also when several adds run at once), the same bytes under
two names are listed with their count of passages, and a second process's additions are searched
without a restart."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from backend.documents import DocumentError, DocumentLimits, DocumentStore

from .conftest import FACT, PDF_PAGES, write_pdf


def titles(store, namespace, query, k=3):
    return [passage.title for passage, _ in store.search(namespace, [query], k)[0]]


def test_a_folder_goes_in_and_the_unreadable_file_is_named(store, sample_dir):
    report = store.add_paths("alice", "samples", [sample_dir])
    assert sorted(info.name for info in report.added) == [
        "board.docx", "field.html", "notes/reactors.md", "plain.txt", "report.pdf"]
    assert [name for name, _ in report.failed] == ["broken.pdf"]
    assert report.skipped == ["picture.png"]
    assert any(line.startswith("FAILED broken.pdf: ") for line in report.lines())
    listed = {info.name: info for collection in store.collections("alice") for info in collection.files}
    assert set(listed) == {info.name for info in report.added}
    assert listed["report.pdf"].pages == 3 and listed["report.pdf"].passages == 3
    assert listed["report.pdf"].bytes == (sample_dir / "report.pdf").stat().st_size
    assert titles(store, "alice", "Quillmoor reactor commissioned")[0] == "notes/reactors.md § Reactors"
    assert titles(store, "alice", "lighthouse keeper ships winter")[0] == "report.pdf p. 2"


def test_adding_again_embeds_nothing_already_indexed(store, sample_dir, counting_embedder, tmp_path):
    store.add_paths("alice", "samples", [sample_dir])
    embedded = len(counting_embedder.texts)
    assert embedded > 0
    again = store.add_paths("alice", "samples", [sample_dir])
    assert len(again.unchanged) == 5 and again.added == [] and again.reused == []
    copy = tmp_path / "copy-of-report.pdf"
    copy.write_bytes((sample_dir / "report.pdf").read_bytes())
    elsewhere = store.add_paths("alice", "archive", [copy])  # the same bytes, another name and collection
    assert [info.name for info in elsewhere.reused] == ["copy-of-report.pdf"] and elsewhere.added == []
    assert len(counting_embedder.texts) == embedded, "content already indexed is never embedded again"
    assert "copy-of-report.pdf p. 2" in titles(store, "alice", "lighthouse keeper ships", k=5)

    changed = sample_dir / "plain.txt"
    changed.write_text("A new paragraph about ferrets.\n", encoding="utf-8")
    before = len(counting_embedder.texts)  # the query above was embedded too
    third = store.add_paths("alice", "samples", [sample_dir])
    assert [info.name for info in third.added] == ["plain.txt"] and len(third.unchanged) == 4
    assert counting_embedder.texts[before:] == ["A new paragraph about ferrets."]
    assert titles(store, "alice", "ferrets")[0] == "plain.txt"
    assert "puppies" not in " ".join(p.text for p, _ in store.search("alice", ["puppies"], 5)[0])


def test_remove_a_file_then_a_collection(store, sample_dir):
    store.add_paths("alice", "samples", [sample_dir])
    assert store.remove("alice", "samples", "notes/reactors.md") == 1
    assert "notes/reactors.md § Reactors" not in titles(store, "alice", "Quillmoor reactor commissioned")
    assert "notes/reactors.md" not in [f.name for c in store.collections("alice") for f in c.files]
    with pytest.raises(DocumentError, match="no file"):
        store.remove("alice", "samples", "notes/reactors.md")
    assert store.remove("alice", "samples") == 4
    assert store.collections("alice") == [] and not store.has_documents("alice")
    assert store.search("alice", ["lighthouse keeper"], 3) == [[]]
    blobs = store.root / "ns-alice" / "blobs"
    assert [p for p in blobs.iterdir() if not p.name.startswith(".")] == [], "stored copies of removed files go"


def test_reindex_reads_the_stored_copy_again(store, sample_dir, counting_embedder):
    store.add_paths("alice", "samples", [sample_dir / "report.pdf"])
    (sample_dir / "report.pdf").unlink()  # the original may be gone: the store kept its own copy
    before = len(counting_embedder.texts)
    report = store.reindex("alice", "samples", "report.pdf")
    assert [info.name for info in report.added] == ["report.pdf"] and report.failed == []
    assert counting_embedder.texts[before:] == PDF_PAGES  # each page's one passage, embedded anew
    assert titles(store, "alice", "northern breakwater")[0] == "report.pdf p. 3"
    with pytest.raises(DocumentError):
        store.reindex("alice", "nothing-here")


def test_limits_refuse_with_a_clear_error(tmp_path, counting_embedder):
    big = write_pdf(tmp_path / "big.pdf", PDF_PAGES)
    small = tmp_path / "small.txt"
    small.write_text("x " * 100)
    store = DocumentStore(tmp_path / "documents", embedder=counting_embedder,
                          limits=DocumentLimits(max_file_bytes=1000, max_namespace_bytes=1000))
    report = store.add_paths("alice", "c", [big, small])
    assert [name for name, _ in report.failed] == ["big.pdf"]
    assert "is more than the 1,000 bytes a file may have (app.max_document_bytes in mia.toml)" in report.failed[0][1]
    other = tmp_path / "other.txt"
    other.write_text("y " * 450)
    quota = store.add_paths("alice", "c", [other])
    assert quota.failed[0][1].startswith("the documents here already take 200 bytes of the 1,000 bytes allowed")
    assert "app.max_namespace_document_bytes" in quota.failed[0][1]
    assert store.add_paths("bob", "c", [other]).failed == []  # the quota is per namespace


def test_a_second_process_adding_is_searched_without_a_restart(store, sample_dir, counting_embedder):
    store.add_paths("alice", "samples", [sample_dir / "plain.txt"])
    assert titles(store, "alice", "Quillmoor reactor") == []
    other_process = DocumentStore(store.root, embedder=counting_embedder)  # e.g. `python -m app index`
    other_process.add_paths("alice", "samples", [sample_dir / "notes" / "reactors.md"])
    assert titles(store, "alice", "Quillmoor reactor commissioned")[0] == "reactors.md § Reactors"


def test_without_an_embedder_bm25_alone_answers_and_vectors_come_later(tmp_path, sample_dir, counting_embedder):
    plain = DocumentStore(tmp_path / "documents")
    plain.add_paths("alice", "samples", [sample_dir / "notes" / "reactors.md"])
    hits = plain.search("alice", ["Quillmoor reactor"], 3)[0]
    assert hits and hits[0][0].title == "reactors.md § Reactors" and hits[0][1] is None
    dense = DocumentStore(tmp_path / "documents", embedder=counting_embedder)
    found = dense.search("alice", ["the power plant Ada Vantrell ran"], 3)[0]
    assert found[0][0].text.startswith(FACT) and found[0][1] > 0.3  # embedded once, when first searched


def test_unsafe_names_from_outside_never_pick_a_path(store, sample_dir):
    for bad in ("../../escape", "a/b", "shared"):
        with pytest.raises(DocumentError):
            store.add_files("alice", bad, [(sample_dir / "plain.txt", "plain.txt")])
    report = store.add_files("alice", "c", [(sample_dir / "plain.txt", "../../../etc/cron.d/x.txt"),
                                            (sample_dir / "plain.txt", "/abs/plain.txt")])
    assert [name for name, _ in report.failed] == ["../../../etc/cron.d/x.txt", "/abs/plain.txt"]
    assert not (store.root.parent / "etc").exists()
    inside = sorted(p.relative_to(store.root).parts[0] for p in store.root.rglob("*"))
    assert set(inside) <= {"ns-alice"}


def test_the_same_bytes_under_two_names_keep_a_count_of_passages(store, sample_dir, tmp_path):
    copy = tmp_path / "copy.pdf"
    copy.write_bytes((sample_dir / "report.pdf").read_bytes())
    report = store.add_files("alice", "c", [(sample_dir / "report.pdf", "report.pdf"), (copy, "copy.pdf")])
    assert [info.name for info in report.added] == ["report.pdf"] and [info.name for info in report.reused] == ["copy.pdf"]
    assert report.reused[0].passages == 3
    listed = {info.name: info.passages for collection in store.collections("alice") for info in collection.files}
    assert listed == {"copy.pdf": 3, "report.pdf": 3}


def test_concurrent_adds_stay_within_the_quota(tmp_path, embedder):
    from backend.tools.wiki_index import EMBEDDER_PROBE

    adders = 6
    all_read = threading.Barrier(adders, timeout=120)

    class EmbedderAfterEveryRead:
        """The real embedder; each add's passages wait until every add has read its file, so that
        all six are past the quota's first check before any is stored."""

        def encode(self, texts):
            if EMBEDDER_PROBE not in texts:
                all_read.wait()
            return embedder.encode(texts)

    files = []
    for number in range(adders):
        path = tmp_path / f"note-{number}.txt"
        path.write_text(f"Note {number}: " + "the harbour trust's ledger " * 36, encoding="utf-8")
        files.append(path)
    size = files[0].stat().st_size
    # Six reads of one user at once (documents.reads_per_user), each past the quota's first check.
    from dataclasses import replace

    from backend.config import DocumentsConfig

    store = DocumentStore(tmp_path / "documents", embedder=EmbedderAfterEveryRead(),
                          limits=DocumentLimits(max_file_bytes=size, max_namespace_bytes=2 * size + size // 2),
                          budget=replace(DocumentsConfig(), reads_per_user=adders))
    with ThreadPoolExecutor(adders) as pool:
        reports = list(pool.map(lambda path: store.add_paths("alice", "c", [path]), files))
    added = [info for report in reports for info in report.added]
    refused = [why for report in reports for _, why in report.failed]
    assert len(added) == 2 and len(refused) == adders - 2
    assert all(why.startswith(f"the documents here already take {2 * size:,} bytes of the") for why in refused)
    assert sum(info.bytes for c in store.collections("alice") for info in c.files) <= 2 * size + size // 2
