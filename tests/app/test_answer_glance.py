"""The answer read at a glance (app/answer_glance.py): the span with its unit, the sentence beside it,
what else was read, and while the run works the best answer so far."""

from __future__ import annotations

from app.answer_glance import also_read, best_so_far, with_unit
from app.render_html import transcript_of
from backend.events import AnswerReady, ExecutorThought, HopAnswered, PlanReady, RunStarted

QUESTION = "How many crowns per berth does the harbour of Vellmark charge?"


def test_a_bare_number_takes_the_unit_the_cited_sentence_gives():
    sentence = "The harbour of Vellmark charges 318 crowns per berth each night."
    assert with_unit("318", sentence, QUESTION) == "318 crowns"
    assert with_unit("27", "Lake Vell is 27 metres deep.") == "27 metres"
    assert with_unit("45", "The rate rose by 45% in 2020.") == "45%"
    assert with_unit("1987", "It opened in 1987 after a decade.") == "1987"  # "after" is no unit
    assert with_unit("Great Exuma", "It was set on Great Exuma island.") == "Great Exuma"  # not a number
    assert with_unit("318", "") == "318"


def test_what_was_read_but_not_cited_is_also_read():
    answer = AnswerReady("r", text="318", sources=[{"n": 1, "title": "dues.md"}],
                         read_from=["dues.md", "Nevada State Route 318", "Harbor", "Harbor"])
    assert also_read(answer) == ["Nevada State Route 318", "Harbor"]


def test_while_the_run_works_the_best_answer_so_far_is_the_latest_hop_or_draft():
    hop = HopAnswered("r", turn=1, number=1, template="Who directed Jaws?", question="Who directed Jaws?",
                      answer="Steven Spielberg", sentence="Jaws (film): Jaws is a 1975 film directed by Steven Spielberg.")
    draft = ExecutorThought("r", turn=2, text="Draft answer 'Ohio' is not stated in the results yet; searching on.",
                            draft="Ohio")
    assert best_so_far([hop]) == ("Steven Spielberg", "hop 1, Who directed Jaws? (Jaws (film))")
    assert best_so_far([hop, draft])[0] == "Ohio"
    assert best_so_far([hop, AnswerReady("r", text="Cincinnati")]) is None  # an answer: nothing "so far" to show
    assert best_so_far([ExecutorThought("r", turn=1, text="look it up")]) is None
    page = transcript_of([RunStarted("r", question="Where was the director of Jaws born?", namespace="default"),
                          PlanReady("r", text="1. Who directed Jaws?", steps=["Who directed Jaws?"]), hop])
    box = page.answer_html()
    assert 'data-state="working"' in box and "So far: <b>Steven Spielberg</b>" in box
