"""The page's steering between runs: a run spends only the steering it was given."""

from __future__ import annotations

from app.steering import PerPage, steering_key, steering_left

FOLLOW_UP = {"question": "Which festival was Billy McFarland charged with wire fraud for?",
             "follow_up": {"of_run": "run-1", "asked": "Which festival was he charged with wire fraud for?"}}


def test_a_run_spends_the_steering_it_was_given():
    assert steering_left(steering_key(FOLLOW_UP), dict(FOLLOW_UP)) == {}
    assert steering_left(steering_key({}), {}) == {}


def test_a_follow_up_asked_as_the_last_run_ended_is_left_for_its_own_run():
    # the plain question's run was given no steering; the follow-up's was set before that run's end
    assert steering_left(steering_key({}), FOLLOW_UP) is None
    assert steering_left(steering_key({"plan": ["a", "b"]}), FOLLOW_UP) is None


def test_a_page_whose_run_recorded_nothing_clears_its_steering():
    assert steering_left(None, FOLLOW_UP) == {}


def test_each_page_keeps_its_own_value_and_the_oldest_pages_go_first():
    pages = PerPage(size=2)
    pages.put("a", 1)
    pages.put("b", 2)
    pages.put("a", 3)  # a is now the newest
    pages.put("c", 4)  # b, the oldest, goes
    assert pages.take("b") is None
    assert (pages.take("a"), pages.take("c")) == (3, 4)
    assert pages.take("a") is None  # taken once
