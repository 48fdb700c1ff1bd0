"""Two questions name the same things, or they are not one question: the exact test (names and
numbers, word for word) that keeps a near-duplicate merge, and so a person's answer, on its own question."""
import pytest

from memory_db import NewMemory
from memory_db.named_things import name_the_same_things, names, names_missing

XLIX = "What was the final score of Super Bowl XLIX?"
XLVIII = "What was the final score of Super Bowl XLVIII?"


@pytest.mark.parametrize("a, b", [
    (XLIX, XLVIII),
    ("Who won World War I?", "Who won World War II?"),
    ("Which wife of Henry VIII was beheaded first?", "Which wife of Henry VII was beheaded first?"),
    ("Which country hosted the 2014 FIFA World Cup?", "Which country hosted the 2010 FIFA World Cup?"),
    ("Who is older, Carrie Akre or Shifty Shellshock?", "Who is older, Carrie Akre or Beck?"),
    ("Who directed the film \"Toy Story 2\"?", "Who directed the film \"Toy Story 3\"?"),
])
def test_questions_naming_different_things_are_told_apart(a, b):
    assert not name_the_same_things(a, b) and not name_the_same_things(b, a)


@pytest.mark.parametrize("a, b", [
    (XLIX, "In Super Bowl XLIX, what was the final score?"),
    ("Which Company published a magazine that was a hybrid video game/film, Red Herring or GameFan?",
     "Red Herring or GameFan: which company published a magazine that was a hybrid of video game and film?"),
    ("Which retired Argentine forward was a main player for Valencia CF?",
     "Which retired Argentine forward was one of Valencia CF's main players?"),
    ("What production company co-owned by Kevin Loader and Rodger Michell produced My Cousin Rachel?",
     "Rodger Michell and Kevin Loader co-own a production company that produced My Cousin Rachel; what is it called?"),
    ("In 1970 Chandgi Ram won a gold medal at which event?", "Chandgi Ram won a gold medal in 1970 at which event?"),
    ("How many people lived in the U.S. in 1,000 AD?", "In 1000 AD, how many people lived in the US?"),
])
def test_a_rewording_names_the_same_things(a, b):
    assert name_the_same_things(a, b)


def test_what_tells_two_questions_apart_is_said_as_written():
    assert names(XLIX) == ["Super Bowl XLIX"]
    assert names_missing(XLIX, XLVIII) == ["Super Bowl XLIX"]
    assert names_missing("Who won in 2014?", "Who won in 2010?") == ["2014"]


def test_a_near_duplicate_about_other_things_is_stored_beside_it_not_merged(open_store, embedder):
    store = open_store()  # merges at cosine 0.95; these two are 0.976 apart
    first = store.add(NewMemory(XLIX, "Searched the game.", "plan", True, namespace="alice"))
    second = store.add(NewMemory(XLVIII, "Searched the game.", "plan", True, namespace="alice"))
    assert second.id != first.id and second.question == XLVIII and store.count(namespace="alice") == 2
    batch = store.add_many([NewMemory("What was the final score of Super Bowl XLVII?", "S.", "plan", True,
                                      namespace="alice")])
    assert store.count(namespace="alice") == 3 and batch[0].id not in {first.id, second.id}
    # a rewording naming the same game is still merged into its memory
    again = store.add(NewMemory("What was the final score in Super Bowl XLIX?", "Searched it.", "plan", True,
                                namespace="alice"))
    assert again.id == first.id and store.count(namespace="alice") == 3
