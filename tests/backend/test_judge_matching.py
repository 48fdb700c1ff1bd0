import pytest

from backend.judge import answer_contains, normalize_answer


def test_normalisation():
    assert normalize_answer("The  Arthur's Magazine!") == "arthurs magazine"


@pytest.mark.parametrize(
    "answer, gold, expected",
    [
        ("Arthur's Magazine", "Arthur's Magazine", True),
        ("It was Arthur's Magazine, started in 1844.", "Arthur's Magazine", True),
        ("Tulsa, Oklahoma", "Tulsa", True),
        ("Tulsan", "Tulsa", False),
        ("First for Women", "Arthur's Magazine", False),
        ("", "Tulsa", False),
    ],
)
def test_answer_contains_gold_as_whole_words(answer, gold, expected):
    assert answer_contains(answer, gold) is expected
