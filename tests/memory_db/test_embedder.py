import threading

import numpy as np

from memory_db import get_embedder


def test_embeddings_are_normalised_384_float32(embedder):
    vectors = embedder.encode(["Who wrote Hamlet?", "Capital of France"])
    assert vectors.shape == (2, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_paraphrases_are_closer_than_unrelated_questions(embedder):
    a, b, c = embedder.encode(["Who wrote Hamlet?", "Who is the author of Hamlet?",
                               "How tall is Mount Everest?"])
    assert a @ b > a @ c + 0.3


def test_empty_input_gives_empty_matrix(embedder):
    assert embedder.encode([]).shape == (0, 384)


def test_get_embedder_is_one_instance_across_threads(embedder):
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(get_embedder())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(instance is embedder for instance in seen)
