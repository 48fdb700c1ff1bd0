import re

import pytest

from backend.tools import build_tools
from backend.tools.base import Tool
from backend.tools.search import TEXT_LIMIT, WikiSearchTool


def test_search_returns_three_passages_per_query_with_sources(wiki_index):
    tool = WikiSearchTool(wiki_index)
    assert isinstance(tool, Tool)
    result = tool({"query_list": ["Fyre Festival", "Kevin Loader film producer"]})
    assert result.ok and result.error is None
    assert len(result.passages) == 6
    assert result.passages[0].title == "Fyre Festival"
    assert result.passages[3].title == "Kevin Loader"
    assert {passage.source for passage in result.passages} <= {"wiki:hotpotqa", "wiki:vital"}
    lines = result.content.splitlines()
    assert lines[0] == 'Results for "Fyre Festival":'
    assert lines[1].startswith("[1] Fyre Festival: The Fyre Festival was")
    assert lines[4] == 'Results for "Kevin Loader film producer":'
    assert [int(number) for number in re.findall(r"^\[(\d+)\]", result.content, re.M)] == [1, 2, 3, 4, 5, 6]


def test_vital_summaries_are_searchable(wiki_index):
    result = WikiSearchTool(wiki_index)({"query_list": ["Photosynthesis"]})
    assert result.passages[0].title == "Photosynthesis"
    assert result.passages[0].source == "wiki:vital"


def test_long_passages_are_capped_in_the_content_but_whole_in_the_passages(wiki_index):
    result = WikiSearchTool(wiki_index)({"query_list": ["Russian Civil War"]})
    longest = max(result.passages, key=lambda passage: len(passage.text))
    assert len(longest.text) > TEXT_LIMIT
    for line in result.content.splitlines()[1:]:
        assert len(line) <= TEXT_LIMIT + len(line.split(": ", 1)[0]) + 2
    assert "…" in result.content


def test_a_query_without_matches_says_so(wiki_index):
    result = WikiSearchTool(wiki_index)({"query_list": ["the of and"]})
    assert result.ok and result.passages == []
    assert "no matching passages" in result.content


def test_a_wrong_shape_says_exactly_what_to_send(wiki_index):
    tool = WikiSearchTool(wiki_index)
    single = tool({"query": "Fyre Festival"})
    assert not single.ok
    assert "missing argument 'query_list'" in single.error and "unknown argument 'query'" in single.error
    assert '{"query_list": ["<query 1>", "<query 2>"]}' in single.error
    assert "list of strings, got str" in tool({"query_list": "Fyre Festival"}).error
    assert "1 to 5 items, got 6" in tool({"query_list": ["a"] * 6}).error


def test_build_tools_offers_web_tools_only_when_enabled(wiki_index, wiki_cache_dir):
    offline = build_tools(cache_dir=wiki_cache_dir, web_enabled=False, progress=False)
    assert "web_search" not in offline and "visit" not in offline and "search" in offline
    online = build_tools(cache_dir=wiki_cache_dir, web_enabled=True, progress=False, struck=lambda namespace: ())
    assert {"search", "web_search", "visit"} <= set(online)
    assert all(name == tool.name for name, tool in online.items())
    assert all(online[name].capabilities.per_namespace for name in ("search", "web_search", "visit")), \
        "each leaves out the sources struck in its caller's namespace"
    assert online["search"].index.timing.built is False, "the session's index is reused, not rebuilt"


def test_a_search_hiding_articles_never_returns_them_and_still_fills_each_query(wiki_index):
    plain = WikiSearchTool(wiki_index)({"query_list": ["Fyre Festival", "Kevin Loader film producer"]})
    hidden = WikiSearchTool(wiki_index).hiding(["Fyre Festival", "Kevin Loader"])
    result = hidden({"query_list": ["Fyre Festival", "Kevin Loader film producer"]})
    assert result.ok and len(result.passages) == 6
    assert {"Fyre Festival", "Kevin Loader"} & {passage.title for passage in result.passages} == set()
    assert [p.title for p in result.passages[:3]][:2] == [p.title for p in plain.passages[1:3]]
    assert hidden.description == WikiSearchTool(wiki_index).description
    bound = hidden.for_namespace("alice")
    assert "Fyre Festival" not in {p.title for p in bound({"query_list": ["Fyre Festival"]}).passages}


def test_hiding_a_title_the_wiki_does_not_hold_is_refused(wiki_index):
    with pytest.raises(ValueError, match="no article titled 'Fyre Festivl'"):
        WikiSearchTool(wiki_index).hiding(["Fyre Festivl"])
