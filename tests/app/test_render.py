import json

from app.render import ChatTranscript, esc, event_to_text, json_for_terminal, safe_url
from backend.events import (
    AnswerReady,
    MemoriesRetrieved,
    MemoryStored,
    PlanReady,
    RunFailed,
    RunStarted,
    ToolCalled,
    ToolReturned,
)

SCRIPT = "<script>alert('x')</script>"


def test_escape_neutralises_html_and_markdown_links():
    out = esc(SCRIPT + " [click](javascript:alert(1))")
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert "[click]" not in out


def test_only_http_urls_become_links():
    assert safe_url("javascript:alert(1)") is None
    assert safe_url("https://example.org/a b(c)") == "https://example.org/a%20b%28c%29"


def test_tool_call_and_response_share_one_collapsible_entry():
    t = ChatTranscript()
    t.add(RunStarted("r1", question=SCRIPT, namespace="default"))
    t.add(PlanReady("r1", text="1. search", steps=["search " + SCRIPT]))
    t.add(ToolCalled("r1", turn=1, name="search", arguments={"query_list": ["q"]}))
    assert t.messages[-1]["metadata"]["status"] == "pending"
    t.add(
        ToolReturned(
            "r1", turn=1, name="search", ok=True, content="...", seconds=0.5,
            passages=[{"title": "Arthur's Magazine", "text": SCRIPT, "source": "wiki:hotpotqa", "score": 1.0, "url": None}],
        )
    )
    tool_entry = t.messages[-1]
    assert len(t.messages) == 3
    assert tool_entry["metadata"]["status"] == "done" and tool_entry["metadata"]["duration"] == 0.5
    assert "Arthur's Magazine" in tool_entry["content"] or "Arthur&#x27;s Magazine" in tool_entry["content"]
    for message in t.messages:
        assert "<script>" not in message["content"]


def test_memories_failures_and_answers_render():
    t = ChatTranscript()
    t.add(
        MemoriesRetrieved(
            "r1",
            successful=[{"id": "abcdef123456", "question": "Q", "summary": "S", "win_rate": 1.0, "score": 0.9}],
            failed=[],
        )
    )
    assert "1 successful, 0 failed" in t.messages[-1]["metadata"]["title"]
    assert t.used_memory_ids == ["abcdef123456"]
    t.add(AnswerReady("r1", text="Arthur's Magazine", sources=[{"title": "T", "url": "javascript:x", "source": "web"}]))
    assert "javascript" not in t.messages[-1]["content"]
    t.add(RunFailed("r1", message="The question is empty: type a question to research."))
    assert "question is empty" in t.messages[-1]["content"]


def test_terminal_text_for_each_kind():
    assert event_to_text(ToolCalled("r", turn=2, name="search", arguments={"query_list": ["x"]})) == (
        '[turn 2] tool call: search {"query_list": ["x"]}'
    )
    assert event_to_text(ToolReturned("r", turn=2, name="web_search", ok=False, content="", error="offline")) == (
        "[turn 2] tool error (web_search): offline"
    )
    assert event_to_text(AnswerReady("r", text="", forced=True, reason="turn limit (8) reached")).startswith(
        "Answer (forced: turn limit (8) reached): (no answer)"
    )


def test_terminal_output_shows_control_characters_instead_of_obeying_them():
    answer = AnswerReady("r", text="Tulsa\x1b[2J\x1b]0;owned\x07 \x9b31m", forced=False, reason="")
    assert event_to_text(answer).splitlines()[0] == "Answer: Tulsa\\x1b[2J\\x1b]0;owned\\x07 \\x9b31m"
    line = json_for_terminal(answer.to_dict())
    assert not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in line)
    assert json.loads(line)["text"] == answer.text


def test_a_stored_memory_says_how_its_text_was_made():
    def stored(source):
        return MemoryStored("r", memory_id="0123456789ab", summary="Plan: Search X. Answer given: Y (incorrect).",
                            correct=False, question_type="human", summary_source=source)

    assert event_to_text(stored("model")).startswith("Memory stored [01234567] (incorrect, human, summary by model): ")
    assert "(incorrect, human, kept as a case: plan and outcome): Plan: Search X." in event_to_text(stored("case"))
    t = ChatTranscript()
    t.add(stored("case"))
    assert "kept as a case: plan and outcome" in t.messages[-1]["content"]


def test_retrieved_memories_link_to_the_memory_view():
    t = ChatTranscript()
    good, bad = "3f2b1c9e-aaaa-bbbb-cccc-0123456789ab", "x)](javascript:alert(1)"
    t.add(MemoriesRetrieved("r1", successful=[{"id": good, "question": "Q", "summary": "S", "win_rate": 0.5, "score": 0.9}],
                            failed=[{"id": bad, "question": "Q", "summary": "S", "win_rate": 0.0, "score": 0.1}]))
    body = t.messages[-1]["content"]
    assert f"(?memory={good})" in body
    assert "javascript" not in body.split("failure lesson")[1].split(":")[0]
    assert "?memory=x" not in body


def test_text_deltas_stream_into_one_draft_that_the_next_step_replaces():
    from backend.events import ExecutorThought, TextDelta

    t = ChatTranscript()
    t.add(RunStarted("r1", question="Q", namespace="default"))
    t.add(TextDelta("r1", turn=1, text="<think>Tinted "))
    t.add(TextDelta("r1", turn=1, text="Windows"))
    assert len(t.messages) == 2
    draft = t.messages[-1]
    assert draft["metadata"]["status"] == "pending" and "Tinted Windows" in draft["content"]
    assert "<think>" not in draft["content"]
    t.add(ExecutorThought("r1", turn=1, text="Tinted Windows"))
    assert len(t.messages) == 2 and "Thought" in t.messages[-1]["metadata"]["title"]
