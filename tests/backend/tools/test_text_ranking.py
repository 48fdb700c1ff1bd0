from backend.tools.text_ranking import rank_texts, tokenize


def test_tokens_are_stemmed_content_words():
    assert tokenize(["The islands running quickly", "of the and"]) == [["island", "run", "quick"], []]


def test_ranking_keeps_only_texts_sharing_a_word_best_first():
    texts = ["a cat sat", "dogs running fast", "a running cat, running", "nothing here"]
    ranked = rank_texts(texts, "run")
    assert [index for index, _ in ranked] == [2, 1]
    assert ranked[0][1] > ranked[1][1] > 0


def test_ranking_degenerate_inputs_is_empty():
    assert rank_texts([], "island") == []
    assert rank_texts(["!!", "??"], "island") == []
    assert rank_texts(["island life"], "the of") == []
    assert rank_texts(["island life"], "volcano") == []
