import json

from app.escaping import escape_markdown
from app.render_html import TranscriptPage, transcript_of
from app.render_text import event_to_text, json_for_terminal
from app.research_assets import KEEP_OPEN_JS
from app.transcript import RunLimits, RunTranscript
from backend.events import (
    AnswerReady,
    ExecutorThought,
    MemoriesRetrieved,
    MemoryStored,
    PlanReady,
    Recovery,
    ReflectionDecided,
    RunFailed,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCalled,
    ToolReturned,
    VerdictReady,
)

SCRIPT = "<script>alert('x')</script>"


def test_escape_neutralises_html_and_markdown_links():
    out = escape_markdown(SCRIPT + " [click](javascript:alert(1))")
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert "[click]" not in out


def passage(title, text, source="wiki:hotpotqa", url=None):
    return {"title": title, "text": text, "source": source, "score": 1.0, "url": url}


DOC_URL = "doc://papers/notes%20on%20magazines.pdf#page=3"


def a_run(at=100.0) -> list:
    """A run in events: a plan, a guided step with a thought and a search, a second step with a
    document passage, the answer (chosen among the question's options) citing both."""
    return [
        RunStarted("r1", question="Which came first, A or B? " + SCRIPT, namespace="default", at=at),
        PlanReady("r1", text="1. search", steps=["Search for " + SCRIPT, "Compare"], at=at + 1),
        Recovery("r1", turn=1, reason="guided turn: no evidence yet", action="first action is search", routine=True,
                 at=at + 2),
        ExecutorThought("r1", turn=1, text="I should look up A " + SCRIPT, at=at + 2),
        ToolCalled("r1", turn=1, name="search", arguments={"query_list": ["Arthur's Magazine"]}, at=at + 2),
        ToolReturned("r1", turn=1, name="search", ok=True, content="...", seconds=0.5, at=at + 4,
                     passages=[passage("Arthur's Magazine", "Arthur's Magazine (1844-1846) was an American literary "
                                       "periodical. " + SCRIPT)]),
        ToolCalled("r1", turn=2, name="search", arguments={"query_list": ["First for Women"]}, at=at + 5),
        ToolReturned("r1", turn=2, name="search", ok=True, content="...", seconds=0.25, at=at + 6,
                     passages=[passage("notes on magazines.pdf", "First for Women was started in 1989.",
                                       source="doc:papers", url=DOC_URL)]),
        Recovery("r1", turn=2, reason="closed question: its answer is one of its options", action="chose A",
                 routine=True, at=at + 7),
        AnswerReady("r1", text="Arthur's Magazine", at=at + 7, sources=[
            {"n": 1, "title": "Arthur's Magazine", "url": None, "source": "wiki:hotpotqa",
             "sentence": "Arthur's Magazine (1844-1846) was an American literary periodical."},
            {"n": 2, "title": "notes on magazines.pdf", "url": DOC_URL, "source": "doc:papers",
             "sentence": "First for Women was started in 1989."}]),
    ]


def finish(events, stopped=False):
    return events + [RunFinished("r1", answer="Arthur's Magazine", stats={"llm_calls": 3}, stopped=stopped)]


def test_the_answer_box_says_working_until_the_run_is_final_then_shows_its_verdict():
    t = TranscriptPage()
    assert 'data-state="idle"' in t.answer_html()
    events = a_run()
    for e in events[:3]:
        t.add(e)
    assert 'data-state="working"' in t.answer_html() and "working…" in t.answer_html()
    for e in events[3:]:
        t.add(e)
    box = t.answer_html()
    assert 'data-state="working"' in box and "Arthur&#x27;s Magazine" in box
    assert "reflection may still revise it" in box  # an answer before reflection is not final
    t.add(ReflectionDecided("r1", replan=False, round=1))
    t.add(VerdictReady("r1", label="correct", method="exact-match", ground_truth="Arthur's Magazine"))
    assert 'data-state="working"' in t.answer_html()
    t.add(RunFinished("r1", answer="Arthur's Magazine", stats={}))
    box = t.answer_html()
    assert 'data-state="final"' in box and ">final<" in box and "revise" not in box
    assert 'Verdict: <b class="run-label">correct (verified against the right answer)</b>' in box


def test_citations_open_the_passage_as_retrieved_escaped_with_the_documents_page():
    t = transcript_of(finish(a_run()))
    box = t.answer_html()
    assert "<script>" not in box and "&lt;script&gt;" in box
    # each mark [n] opens the panel of the same key, which holds the passage's text
    for n in (1, 2):
        assert f'data-cite="r1:cite:{n}"' in box and f'<details class="citation" data-key="r1:cite:{n}">' in box
    first = box.split('data-key="r1:cite:1">')[1].split("</details>")[0]
    assert "was an American literary periodical. &lt;script&gt;" in first  # the whole passage, not just the sentence
    second = box.split('data-key="r1:cite:2">')[1].split("</details>")[0]
    assert "document notes on magazines.pdf (collection papers), page 3" in second
    assert "First for Women was started in 1989." in second
    assert "href=" not in second  # a doc:// locator is no link


def test_a_citation_never_links_anything_but_http():
    t = TranscriptPage()
    t.add(RunStarted("r1", question="Q", namespace="default"))
    t.add(AnswerReady("r1", text="A", sources=[{"n": 1, "title": "T", "url": "javascript:alert(1)", "source": "web",
                                                 "sentence": "s"}]))
    t.add(RunFinished("r1", answer="A"))
    assert "href" not in t.answer_html()


def test_a_stopped_run_is_marked_stopped_with_the_answer_so_far():
    events = a_run()[:-1] + [AnswerReady("r1", text="Arthur's Magazine", forced=True, reason="stopped by the user")]
    box = transcript_of(finish(events, stopped=True)).answer_html()
    assert 'data-state="stopped"' in box and "not judged and no memory was stored" in box
    assert "Answer forced" not in box
    before_any = transcript_of([RunStarted("r1", question="Q", namespace="d"),
                                RunFinished("r1", answer="", stopped=True)]).answer_html()
    assert 'data-state="stopped"' in before_any and "Stopped before any answer" in before_any


def test_a_failed_run_shows_its_message_in_the_answer_box():
    t = transcript_of([RunFailed("r1", message="The question is empty: type a question to research. " + SCRIPT)])
    box = t.answer_html()
    assert 'data-state="failed"' in box and "The question is empty" in box and "<script>" not in box
    assert "The question is empty" in t.trace_html()


def test_the_trace_is_one_line_per_step_with_guided_steps_and_thoughts_in_its_details():
    trace = transcript_of(finish(a_run())).trace_html()
    assert "<script>" not in trace
    steps = trace.split('<details class="entry step"')[1:]
    assert len(steps) == 2
    summary, details = steps[0].split("</summary>")[0], steps[0].split("</summary>")[1]
    assert "Step 1" in summary and "search “Arthur&#x27;s Magazine” → 1 passage: Arthur&#x27;s Magazine" in summary
    assert "recover" not in summary and "⚠️" not in summary and "0.5 s" in summary  # a guided step is no warning
    assert "I should look up" not in summary  # the thought is in the details
    assert "Thought:</b> I should look up A &lt;script&gt;" in details
    assert "🧭 Guided: guided turn: no evidence yet → first action is search" in details
    second = steps[1].split("</summary>")[0]
    assert "search “First for Women” → 1 passage" in second and "answered “Arthur&#x27;s Magazine”" in second
    assert "closed question" in steps[1].split("</summary>")[1]  # its guided choice, under its own step
    assert "Recovery:" not in trace and "⚠️" not in trace
    assert "🗺️ Plan · 2 steps: Search for &lt;script&gt;" in trace
    assert "📊 Run summary" in trace


def test_a_pending_tool_call_shows_in_its_step_line_until_it_returns():
    t = TranscriptPage()
    t.add(RunStarted("r1", question="Q", namespace="default"))
    t.add(ToolCalled("r1", turn=1, name="search", arguments={"query_list": ["q"]}))
    assert "search “q” → searching…" in t.trace_html()
    t.add(ToolReturned("r1", turn=1, name="search", ok=False, content="", error="the index is not ready"))
    assert "❌ the index is not ready" in t.trace_html() and "searching…" not in t.trace_html()


def test_text_deltas_stream_into_their_step_and_the_next_event_replaces_them():
    t = TranscriptPage()
    t.add(RunStarted("r1", question="Q", namespace="default"))
    t.add(TextDelta("r1", turn=1, text="<think>Tinted "))
    t.add(TextDelta("r1", turn=1, text="Windows"))
    trace = t.trace_html()
    assert "writing…" in trace and "&lt;think&gt;Tinted Windows" in trace and "<think>" not in trace
    t.add(ExecutorThought("r1", turn=1, text="Tinted Windows"))
    trace = t.trace_html()
    assert "writing…" not in trace and "Tinted Windows" in trace
    assert [type(e).__name__ for e in t.events] == ["RunStarted", "ExecutorThought"]  # deltas are not kept


def test_the_rough_eta_goes_by_the_pace_so_far_and_the_time_limit():
    limits = RunLimits(max_seconds=600, turns=4, supplement_turns=2, reflections=1)
    t = RunTranscript()
    t.add(RunStarted("r1", question="Q", namespace="default", at=1000.0))
    assert "no step has run yet" in t.eta_text(limits, now=1010.0)
    assert "within 9 min 50 s" in t.eta_text(limits, now=1010.0)
    t.add(ToolCalled("r1", turn=1, name="search", arguments={}, at=1010.0))
    t.add(ToolCalled("r1", turn=2, name="search", arguments={}, at=1020.0))
    # 30 s for 2 steps begun (planning included): 15 s a step; up to 2 more of 4, then reflection
    # and the verdict: 4 x 15 s
    eta = t.eta_text(limits, now=1030.0)
    assert eta.startswith("About 1 min 00 s left (rough: 15 s per step so far, up to 2 more steps of 4")
    assert "within 9 min 30 s" in eta
    assert t.eta_text(RunLimits(max_seconds=50, turns=4, supplement_turns=2, reflections=1), now=1030.0).startswith(
        "About 20 s left")  # capped by the time limit
    t.add(RunFinished("r1", answer=""))
    assert t.eta_text(limits, now=1030.0) == ""


def test_retrieved_memories_link_to_the_memory_view_and_nothing_else():
    t = TranscriptPage()
    good, bad = "3f2b1c9e-aaaa-bbbb-cccc-0123456789ab", "x\"><script>alert(1)</script>"
    t.add(MemoriesRetrieved("r1", successful=[{"id": good, "question": "Q", "summary": "S", "win_rate": 0.5, "score": 0.9}],
                            failed=[{"id": bad, "question": "Q", "summary": "S", "win_rate": 0.0, "score": 0.1}]))
    trace = t.trace_html()
    assert f'href="?memory={good}"' in trace
    assert "<script>" not in trace and trace.count("href=") == 1
    assert "1 successful, 1 failed" in trace
    assert t.run.memories_used == [good, bad]


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
    t = TranscriptPage()
    t.add(stored("case"))
    assert "kept as a case: plan and outcome" in t.trace_html()


def step_summaries(events) -> list[str]:
    trace = transcript_of(events).trace_html()
    return [step.split("</summary>")[0] for step in trace.split('<details class="entry step"')[1:]]


def test_only_real_recoveries_warn_a_repaired_reply_and_a_forced_answer():
    start = [RunStarted("r1", question="Who founded A?", namespace="default")]
    repaired = [Recovery("r1", turn=1, reason="no <tool_call> or <answer> in the reply", action="searching the question itself",
                         raw="garbage"),
                ToolCalled("r1", turn=1, name="search", arguments={"query_list": ["Who founded A?"]}),
                ToolReturned("r1", turn=1, name="search", ok=True, content="...", passages=[passage("A", "A was founded by B.")])]
    guided = [Recovery("r1", turn=2, reason="guided turn: 2 searches are needed", action="next action is search", routine=True),
              ToolCalled("r1", turn=2, name="search", arguments={"query_list": ["A founder"]})]
    forced = [ExecutorThought("r1", turn=3, text="B founded it"),
              AnswerReady("r1", text="B", forced=True, reason="turn limit (3) reached")]
    first, second, third = step_summaries(start + repaired + guided + forced)
    assert "⚠️ 1 recovery" in first  # the model's reply was unusable and was repaired
    assert "⚠️" not in second and "recover" not in second  # the guided procedure's own step
    assert "⚠️ 1 recovery" in third and "answer forced" in third
    [stopped] = step_summaries(start + [ExecutorThought("r1", turn=1, text="t"),
                                        AnswerReady("r1", text="B", forced=True, reason="stopped by the user")])
    assert "⚠️" not in stopped and "answer so far" in stopped  # the person's Stop is no recovery


def test_the_terminal_tells_a_guided_step_from_a_recovery():
    guided = Recovery("r1", turn=1, reason="guided turn: no evidence yet", action="first action is search", routine=True)
    repaired = Recovery("r1", turn=2, reason="no <answer> in the reply", action="constrained choice: answer now")
    assert event_to_text(guided) == "[turn 1] guided: guided turn: no evidence yet -> first action is search"
    assert event_to_text(repaired) == "[turn 2] recovery: no <answer> in the reply -> constrained choice: answer now"


def test_the_default_guided_turns_of_a_real_run_carry_no_warning(runtime):
    from backend.agent import RunRequest

    events = list(runtime.agent.run(RunRequest("Which magazine was started first, Arthur's Magazine or First for Women?")))
    guided = [e for e in events if isinstance(e, Recovery) and e.reason.startswith("guided turn:")]
    assert guided and all(e.routine for e in guided)  # the executor marks its procedure's steps as such
    first = step_summaries(events)[0]
    assert "Step 1" in first and "⚠️" not in first and "recover" not in first


def test_a_document_source_opens_through_the_server_and_a_wiki_source_needs_no_button():
    t = transcript_of(finish(a_run()))
    box, trace = t.answer_html(), t.trace_html()
    wiki = box.split('data-key="r1:cite:1">')[1].split("</details>")[0]
    document = box.split('data-key="r1:cite:2">')[1].split("</details>")[0]
    opener = f'<button type="button" class="doc-open" data-doc="{DOC_URL}"'
    assert opener in document and "data-doc" not in wiki
    assert trace.count(opener) == 1  # the passage in its step's details opens the same way
    assert "trigger('open_source'" in KEEP_OPEN_JS  # which asks the server for it


def test_a_reopened_run_that_never_ended_is_marked_unfinished_not_working():
    t = transcript_of(a_run())
    assert t.state == "working"
    t.interrupted = True
    box = t.answer_html()
    assert 'data-state="unfinished"' in box and "interrupted before it finished" in box
    assert "Arthur&#x27;s Magazine" in box  # the answer so far
