"""What a question's image text leaves to search, on questions of the `train` image benchmark
(benchmarks/image_questions.py renders a question's first-hop page, headed by its title)."""

from __future__ import annotations

from backend.image_gaps import compared_things, gap_query, image_heading, is_about
from backend.question import Question


def test_a_page_heading_is_its_short_first_line():
    assert image_heading("\n  Ernst Messerschmid\n\nProf. Dr. Ernst Willi Messerschmid (born May 21, 1945)") == \
        "Ernst Messerschmid"
    assert image_heading("The harbour charges 17 crowns per tonne from 2025 onwards in all its docks.\nMore") == ""
    assert image_heading("Tariff 2025:\n17 crowns") == ""  # a line that ends in a colon is not a heading
    assert image_heading("") == ""


def test_the_things_a_question_compares():
    assert compared_things(Question.parse("Who was born first, Marino Girolami or Daniel Myrick?")) == ["Marino Girolami", "Daniel Myrick"]
    assert compared_things(Question.parse("What is the year of the event which orrurred first, Beecher's Handmade "
                                          "Cheese was founded, or Pike Place Market opened?")) == ["Beecher's Handmade Cheese", "Pike Place Market"]
    assert compared_things(Question.parse("Are Random House Tower and 888 7th Avenue both used for real estate?")) == \
        ["Random House Tower", "888 7th Avenue"]
    assert compared_things(Question.parse("What is the name of the actress who played Blair Cramer on One Life to "
                                          "Live?")) == []


def test_a_passage_is_about_a_thing_when_one_name_holds_the_other():
    assert is_about("Ernst Messerschmid", "two scientists Ernst Messerschmid")
    assert is_about("Second Battle of Bull Run", "the Second Battle of Bull Run")
    assert not is_about("Pike Place Market", "Beecher's Handmade Cheese")
    assert not is_about("", "Pike Place Market")


def test_the_option_the_page_is_not_about_is_searched_by_its_name_once():
    question = Question.parse("Between two scientists Ernst Messerschmid and Philippe Perrin, who is older?")
    assert gap_query(question, "Ernst Messerschmid", [], set()) == "Philippe Perrin"
    assert gap_query(question, "Ernst Messerschmid", ["Philippe Perrin"], set()) is None  # found
    assert gap_query(question, "Ernst Messerschmid", ["Ernst Weiss"], {"philippe perrin"}) is None  # searched
    assert gap_query(question, "Philippe Perrin", [], set()) == "Ernst Messerschmid"  # the name, not "two scientists"
    battles = Question.parse("Which battle, the Battle of Cold Harbor, or the Second Battle of Bull Run, was fought first?")
    assert gap_query(battles, "Battle of Cold Harbor", [], set()) == "Second Battle of Bull Run"


def test_a_heading_the_question_does_not_name_is_the_bridge_to_search():
    question = Question.parse("The southernmost administrative region of Denmark is well-known for creating what products?")
    assert gap_query(question, "Region Zealand", [], set()) == "Region Zealand"
    assert gap_query(question, "Region Zealand", [], {"region zealand"}) is None
    # a heading the question names is what the page already covers; no heading, nothing to add
    assert gap_query(Question.parse("New York State Route 9R rejoins its parent in a hamlet in what New York County?"),
                     "New York State Route 9R", [], set()) is None
    assert gap_query(question, "", [], set()) is None


def test_a_question_about_the_image_itself_has_no_bridge_to_search():
    assert gap_query(Question.parse("What tariff per tonne does the notice in this image state?"), "HARBOUR OF VELLMARK", [], set()) is None
    assert gap_query(Question.parse("Which harbour charges the tariff shown here?"), "HARBOUR OF VELLMARK", [], set()) is None
