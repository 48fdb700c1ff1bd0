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
        ("Arthur's Magazine (1844\u20131846) was an American literary periodical", "1844-1846", True),  # an en dash
    ],
)
def test_answer_contains_gold_as_whole_words(answer, gold, expected):
    assert answer_contains(answer, gold) is expected


class _NoGrader:
    """A grader for verdicts the Judge's rules decide without the model (a closed question's option, a
    match with the gold answer): any call to it fails the test."""

    def choose(self, *args, **kwargs):
        raise AssertionError("a verdict the rules decide must not ask the grader model")


def test_a_closed_question_is_graded_by_the_option_the_answer_names():
    from backend.judge import CORRECT, INCORRECT, Judge

    judge = Judge(_NoGrader())
    yes_no = "Were Scott Derrickson and Ed Wood of the same nationality?"
    assert judge.grade(yes_no, "yes", "no").label == INCORRECT
    assert judge.grade(yes_no, "No, they were not", "no").label == CORRECT
    verdict = judge.grade(yes_no, "They were both filmmakers", "no")
    assert verdict.label == INCORRECT and verdict.method == "closed-choice" and "names none" in verdict.feedback[0]
    choice = "Who is older, Annie Morton or Terry Richardson?"
    assert judge.grade(choice, "Terry Richardson", "Terry Richardson").label == CORRECT
    assert judge.grade(choice, "Annie Morton", "Terry Richardson").label == INCORRECT


def test_the_gold_answer_itself_is_correct_even_where_it_looks_cut_off():
    from backend.judge import CORRECT, NOT_ATTEMPTED, Judge

    judge = Judge(_NoGrader())
    question = "Vardø is the easternmost town in which Norwegian county?"
    verdict = judge.grade(question, "Finnmark county,", "Finnmark county,")  # a HotpotQA gold with its comma
    assert verdict.label == CORRECT and verdict.method == "exact-match"
    assert judge.grade(question, "Troms county,", "Finnmark county,").label == NOT_ATTEMPTED  # still cut off
    assert judge.grade(question, "", "").label == NOT_ATTEMPTED


def test_a_number_in_digits_is_the_same_answer_as_its_word():
    from backend.judge import CORRECT, Judge

    judge = Judge(_NoGrader())  # decided by matching: the grader model is never asked
    question = "Jamie Campbell Bower was a cast member of the TNT show that was canceled after how many seasons?"
    verdict = judge.grade(question, "1", "one")  # the reader's answer on `train`, graded wrong by the model
    assert verdict.label == CORRECT and verdict.method == "exact-match"
    assert judge.grade("How long did the strike last?", "It lasted five months", "5 months").label == CORRECT
    assert answer_contains("1", "one") is False  # where a sentence states an answer, words stay words


def test_a_different_number_is_still_asked_of_the_grader():
    from backend.judge import Judge

    judge = Judge(_NoGrader())
    with pytest.raises(AssertionError, match="must not ask the grader"):
        judge.grade("How many seasons did the show run?", "2", "one")
