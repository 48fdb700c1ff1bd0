import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from backend.tools.corpus import HOTPOTQA_SOURCE, VITAL_SOURCE, Document
from backend.tools.wiki_index import INDEX_FOLDER, WikiIndex, reciprocal_rank_fusion

TINY_HOTPOTQA = [
    Document("Kevin Loader", "Kevin Loader is a British film and television producer.", HOTPOTQA_SOURCE),
    Document("Fyre Festival", "The Fyre Festival was a music festival on Great Exuma in the Bahamas.", HOTPOTQA_SOURCE),
    Document("Poleconomy", "Poleconomy is a board game first published in 1983.", HOTPOTQA_SOURCE),
]
TINY_VITAL = [
    Document("Automobile", "A car is a motor vehicle with wheels used for transportation.", VITAL_SOURCE),
    Document("Dog", "The dog is a domesticated descendant of the wolf, kept as a pet.", VITAL_SOURCE),
    Document("Piano", "The piano is a keyboard instrument whose strings are struck by hammers.", VITAL_SOURCE),
]


def test_the_real_index_is_built_once_and_reused(wiki_index: WikiIndex, wiki_cache_dir: Path):
    assert wiki_index.timing.built, "the session fixture starts from an empty cache"
    stamp = (wiki_index.directory / "documents.json").stat().st_mtime_ns
    again = WikiIndex.load_or_build(wiki_cache_dir, progress=False)
    assert not again.timing.built
    assert again.directory == wiki_index.directory
    assert (again.directory / "documents.json").stat().st_mtime_ns == stamp
    assert len(again.documents) == len(wiki_index.documents) > 15000
    assert [entry.name for entry in (wiki_cache_dir / INDEX_FOLDER).iterdir()] == [wiki_index.directory.name]


def test_a_changed_corpus_file_rebuilds_and_drops_the_old_index(tmp_path: Path, write_tiny_corpus):
    files = write_tiny_corpus(tmp_path / "corpus", TINY_HOTPOTQA, TINY_VITAL)
    first = WikiIndex.load_or_build(tmp_path / "cache", progress=False, files=files)
    assert first.timing.built
    assert not WikiIndex.load_or_build(tmp_path / "cache", progress=False, files=files).timing.built

    summaries = files.vital_summaries
    summaries.write_text(summaries.read_text().replace("keyboard instrument", "zyxophone instrument"))
    changed = WikiIndex.load_or_build(tmp_path / "cache", progress=False, files=files)
    assert changed.timing.built and changed.directory != first.directory
    assert not first.directory.exists()
    assert changed.search(["zyxophone"])[0][0].title == "Piano"


def test_a_damaged_index_is_rebuilt(tmp_path: Path, write_tiny_corpus):
    files = write_tiny_corpus(tmp_path / "corpus", TINY_HOTPOTQA, TINY_VITAL)
    first = WikiIndex.load_or_build(tmp_path / "cache", progress=False, files=files)
    (first.directory / "documents.json").write_text("{ not json")
    again = WikiIndex.load_or_build(tmp_path / "cache", progress=False, files=files)
    assert again.timing.built
    assert again.search(["Poleconomy board game"])[0][0].title == "Poleconomy"


def test_no_half_built_folder_is_left_behind(tmp_path: Path, write_tiny_corpus):
    files = write_tiny_corpus(tmp_path / "corpus", TINY_HOTPOTQA, TINY_VITAL)
    index = WikiIndex.load_or_build(tmp_path / "cache", progress=False, files=files)
    assert os.listdir(tmp_path / "cache" / INDEX_FOLDER) == [index.directory.name]

    crashed = tmp_path / "cache" / INDEX_FOLDER / ".building-0123-dead"
    running = tmp_path / "cache" / INDEX_FOLDER / ".building-4567-live"
    crashed.mkdir()
    running.mkdir()
    os.utime(crashed, (time.time() - 7200, time.time() - 7200))
    files.hotpotqa[0].write_text(files.hotpotqa[0].read_text().replace("producer", "director"))
    rebuilt = WikiIndex.load_or_build(tmp_path / "cache", progress=False, files=files)
    assert sorted(os.listdir(tmp_path / "cache" / INDEX_FOLDER)) == sorted([rebuilt.directory.name, running.name])


@pytest.mark.parametrize("question_number", [1, 2, 4, 10, 20])
def test_a_gold_title_finds_its_own_paragraph(wiki_index: WikiIndex, train_questions, question_number):
    for title in set(train_questions[question_number]["supporting_facts"]["title"]):
        passages = wiki_index.search([title], k=3)[0]
        assert title in [passage.title for passage in passages], f"{title!r} not in top 3"


def test_questions_retrieve_their_supporting_paragraphs(wiki_index: WikiIndex, train_questions):
    questions = train_questions[:60]
    results = wiki_index.search([question["question"] for question in questions], k=3)
    found = [
        bool(set(question["supporting_facts"]["title"]) & {passage.title for passage in passages})
        for question, passages in zip(questions, results, strict=True)
    ]
    assert sum(found) / len(found) >= 0.7  # at least one gold paragraph in the top 3


def test_a_query_naming_a_title_exactly_ranks_it_first(wiki_index: WikiIndex):
    # nearly all stop words: BM25 alone ranks other "goodbye" songs above it
    for query in ["I Will Not Say Goodbye", "i will not say goodbye ", '"I Will Not Say Goodbye"']:
        passages = wiki_index.search([query], k=3)[0]
        assert passages[0].title == "I Will Not Say Goodbye"
        assert len({passage.title for passage in passages}) == 3


def test_search_answers_each_query_in_order_with_scores_descending(wiki_index: WikiIndex):
    results = wiki_index.search(["Fyre Festival", "Poleconomy board game", "the of and"], k=3)
    assert results[0][0].title == "Fyre Festival"
    assert results[1][0].title == "Poleconomy"
    assert results[2] == [], "a query of stop words only matches nothing"
    scores = [passage.score for passage in results[0]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 3


def test_reciprocal_rank_fusion_rewards_agreement():
    bm25 = [(1, 9.0), (2, 5.0), (3, 1.0)]
    dense = [(4, 0.9), (2, 0.8), (5, 0.5), (1, 0.1)]
    fused = reciprocal_rank_fusion([bm25, dense])
    order = [index for index, _ in fused]
    assert order[:2] == [2, 1]  # ranks 2+2 beat 1+4; both beat a single top rank
    assert set(order[2:]) == {3, 4, 5}
    assert fused[0][1] == pytest.approx(2 / 62)
    assert reciprocal_rank_fusion([[], []]) == []


def test_hybrid_finds_a_paraphrase_bm25_misses_and_caches_embeddings(tmp_path: Path, write_tiny_corpus, minilm):
    files = write_tiny_corpus(tmp_path / "corpus", TINY_HOTPOTQA, TINY_VITAL)
    query = "puppy"  # no word in common with the Dog summary
    lexical = WikiIndex.load_or_build(tmp_path / "cache", progress=False, files=files)
    assert lexical.search([query])[0] == []

    hybrid = WikiIndex.load_or_build(tmp_path / "cache", progress=False, files=files, embedder=minilm)
    assert hybrid.hybrid and hybrid.timing.dense_built
    assert hybrid.document_vectors.shape == (6, 384)
    assert np.allclose(np.linalg.norm(hybrid.document_vectors, axis=1), 1.0, atol=1e-4)
    assert hybrid.search([query])[0][0].title == "Dog"
    # both retrievers agree on the exact title, so fusion keeps it first
    assert hybrid.search(["Poleconomy board game"])[0][0].title == "Poleconomy"

    reloaded = WikiIndex.load_or_build(tmp_path / "cache", progress=False, files=files, embedder=minilm)
    assert not reloaded.timing.dense_built
    assert np.array_equal(reloaded.document_vectors, hybrid.document_vectors)


def test_the_web_apps_background_build_waits_for_another_builder_then_loads_its_vectors(
        tmp_path: Path, write_tiny_corpus, minilm):
    from backend.tools.dense_build import build_lock

    files = write_tiny_corpus(tmp_path / "corpus", TINY_HOTPOTQA, TINY_VITAL)
    cache = tmp_path / "cache"
    with build_lock(cache, wait=True):  # the command line's build holds it
        index = WikiIndex.load_or_build(cache, progress=False, files=files, embedder=minilm, dense_in_background=True)
        builder = next(t for t in threading.enumerate() if t.name == "dense-vectors")
        builder.join(timeout=0.2)
        assert builder.is_alive() and not index.hybrid  # waiting, BM25 answering meanwhile
        built = WikiIndex.load_or_build(cache, progress=False, files=files, embedder=minilm)  # the other builder
        cached = next(built.directory.glob("*.npy")).stat().st_ino
    builder.join(timeout=60)
    assert not builder.is_alive() and index.hybrid
    assert np.array_equal(index.document_vectors, built.document_vectors)
    assert next(built.directory.glob("*.npy")).stat().st_ino == cached  # loaded, not embedded a second time
