import socket

import pytest

from backend.tools.web_search import WebSearchTool


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_unreachable_web_fails_fast_and_points_to_local_search(monkeypatch, closed_port):
    # the real ddgs client, forced through a proxy that refuses connections: offline on any machine
    monkeypatch.setenv("DDGS_PROXY", f"http://127.0.0.1:{closed_port}")
    result = WebSearchTool()({"query_list": ["Fyre Festival"]})
    assert not result.ok
    assert result.error.startswith("web search is unreachable (")
    assert result.error.endswith("use the local `search` tool instead.")
    assert result.seconds < 15


def test_results_are_formatted_like_local_search_with_links():
    def fake_ddgs(query: str, max_results: int) -> list[dict]:  # the shape ddgs.DDGS().text returns
        return [
            {"title": f"{query} {n}", "href": f"https://example.org/{n}", "body": f"snippet {n} " * 200}
            for n in range(1, 6)
        ][:max_results]

    result = WebSearchTool(text_search=fake_ddgs)({"query_list": ["alpha", "beta"]})
    assert result.ok and len(result.passages) == 6
    assert [passage.url for passage in result.passages[:3]] == [f"https://example.org/{n}" for n in (1, 2, 3)]
    assert {passage.source for passage in result.passages} == {"web"}
    lines = result.content.splitlines()
    assert lines[0] == 'Results for "alpha":'
    assert lines[1].startswith("[1] alpha 1 <https://example.org/1>: snippet 1")
    assert all(len(line) < 500 for line in lines)


def test_no_results_is_an_empty_answer_not_an_outage():
    from ddgs.exceptions import DDGSException

    def nothing(query: str, max_results: int) -> list[dict]:
        raise DDGSException("No results found.")

    result = WebSearchTool(text_search=nothing)({"query_list": ["zzzz"]})
    assert result.ok and result.passages == []
    assert "no matching passages" in result.content


def test_bad_arguments_are_refused_before_any_request():
    calls = []
    result = WebSearchTool(text_search=lambda q, n: calls.append(q) or [])({"query_list": [""]})
    assert not result.ok and calls == []
