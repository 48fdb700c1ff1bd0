"""A correction in headless Chromium: a wrong answer, the right one typed, the question asked again and
answered with it, the correction named on the page. The tiny random model answers at first; what the
person typed is what the app answers next."""

from __future__ import annotations

import pytest

from tests.app.conftest import login

pytestmark = pytest.mark.browser

EIFFEL = "Which city is the capital of the country where the Eiffel Tower stands?"
REWORDED = "What is the capital city of the country in which the Eiffel Tower is located?"


def ask(page, question: str) -> str:
    """Runs a question on a freshly loaded page; returns the answer box's text once the run is done."""
    page.locator("#question textarea, #question input").first.fill(question)
    page.locator("#ask").click()
    page.locator("#trace").get_by_text("📊 Run summary").wait_for(timeout=90_000)
    return page.locator("#answer-box").inner_text()


@pytest.mark.timeout(600)  # starts an app, then four questions, each bounded at 90 s
def test_a_typed_correction_answers_the_question_next_time_and_says_so(start_app, new_page):
    url, ctx = start_app(with_logins=True)
    page = new_page()
    login(page, url, "alice", "alice-pass")
    first = ask(page, EIFFEL)
    assert "You corrected this" not in first
    page.locator("#right-answer input, #right-answer textarea").first.fill("Paris")
    page.locator("#thumbs-down").click()
    result = page.locator("#feedback-result")
    result.get_by_text("Remembered 'Paris' as the answer").wait_for()
    assert "A source states it: Eiffel Tower" in result.inner_text()

    for question in (EIFFEL, REWORDED):
        again = new_page()  # a new visit: the trace holds only the new run
        login(again, url, "alice", "alice-pass")
        answer = ask(again, question)
        assert "Paris" in again.locator("#answer-box .answer-text").inner_text()
        assert "You corrected this on" in answer and ": Paris. A retrieved source states it" in answer
        assert "Eiffel Tower" in again.locator("#answer-box .citations").inner_text()
        assert "🎓 You corrected this on" in again.locator("#trace").inner_text()

    other = new_page()  # another user's question is theirs alone
    login(other, url, "bob", "bob-pass")
    assert "You corrected this" not in ask(other, EIFFEL)
