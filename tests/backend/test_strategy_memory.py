"""A memory's strategy: how it was researched, without any of its names (backend.strategy)."""

from __future__ import annotations

from backend.strategy import query_origin, strategy_outline

BRIDGE = "What year was the director of the film Night Harbour born?"


def test_the_outline_describes_searches_by_where_their_queries_came_from_and_names_nothing():
    workflow = {
        "searches": [
            {"tool": "search", "queries": ["Night Harbour film"], "titles": ["Night Harbour", "Harbour Lights"]},
            {"tool": "search", "queries": ["Mira Okafor director"], "titles": ["Mira Okafor"]},
        ],
        "support_title": "Mira Okafor",
        "gold_retrieved": True,
    }
    workflow["searches"][0]["titles"].append("Mira Okafor")  # the first search's results named the director
    right = strategy_outline(BRIDGE, workflow, "1961", correct=True)
    assert right == ("searched for a name from the question, then for a name the first search found; "
                     "the answer was stated in the first search's results; it was right.")

    wrong = strategy_outline(BRIDGE, {**workflow, "searches": workflow["searches"][:1], "gold_retrieved": False,
                                      "support_title": None}, "Mira Okafor", correct=False)
    assert "a step on the way rather than what was asked" in wrong
    assert "the right answer was in no result: a further search was needed" in wrong
    for name in ("night", "harbour", "mira", "okafor", "1961"):
        assert name not in right.lower() and name not in wrong.lower()


def test_query_origins():
    earlier = [["Night Harbour", "Mira Okafor"]]
    assert query_origin(BRIDGE, BRIDGE, []) == "the whole question"
    assert query_origin("Night Harbour", BRIDGE, []) == "a name from the question"
    assert query_origin("Mira Okafor birth", BRIDGE, earlier) == "a name the first search found"
    assert query_origin("lighthouse keepers guild", BRIDGE, earlier) == "words of its own"

