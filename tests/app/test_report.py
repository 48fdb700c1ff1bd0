"""The report of a run (app/report.py): Markdown for people, the events as JSON, from the events alone."""

from __future__ import annotations

import json

from app.escaping import escape_markdown_file
from app.report import (
    cited_passage, document_place, report_markdown, report_names, run_json, source_label, web_link,
    write_report_files,
)
from backend.events import (
    AnswerReady, PlanReady, ReflectionDecided, RunFinished, RunStarted, StepTaken, TextDelta, ToolCalled,
    ToolReturned, VerdictReady, event_from_dict,
)
from backend.feedback_queue import FeedbackItem

SCRIPT = "<script>alert('x')</script>"
DOC_URL = "doc://shared/papers/notes%20on%20magazines.pdf#page=3"


def passage(title, text, source="wiki:hotpotqa", url=None):
    return {"title": title, "text": text, "source": source, "score": 1.0, "url": url}


def run_events(stopped=False):
    events = [
        RunStarted("r1", question="Which came first, A or B?", namespace="default", ground_truth="A"),
        PlanReady("r1", text="1. search", steps=["Search for A", "Search for B " + SCRIPT]),
        ToolCalled("r1", turn=1, name="search", arguments={"query_list": ["A magazine"]}),
        ToolReturned("r1", turn=1, name="search", ok=True, content="...", passages=[
            passage("A", "A (1844) was a magazine.\nIts second line [link](javascript:x)."),
            passage("Other", "Unrelated.")]),
        TextDelta("r1", turn=2, text="<think>"),
        ToolCalled("r1", turn=2, name="search", arguments={"query_list": ["B magazine"]}),
        ToolReturned("r1", turn=2, name="search", ok=True, content="...", passages=[
            passage("notes on magazines.pdf", "B was started in 1989.", source="doc:papers", url=DOC_URL)]),
        AnswerReady("r1", text="A", sources=[
            {"n": 1, "title": "A", "url": None, "source": "wiki:hotpotqa", "sentence": "A (1844) was a magazine."},
            {"n": 2, "title": "notes on magazines.pdf", "url": DOC_URL, "source": "doc:papers",
             "sentence": "B was started in 1989."}]),
    ]
    if stopped:
        return events + [AnswerReady("r1", text="A", forced=True, reason="stopped by the user", sources=events[-1].sources),
                         RunFinished("r1", answer="A", stats={"llm_calls": 4}, stopped=True)]
    steps = [{"turn": 1, "think": "look up A", "tool": "search", "arguments": {"query_list": ["A magazine"]}, "ok": True,
              "titles": ["A", "Other"], "answer": None, "recovery": "guided turn: no evidence yet", "format_problems": []},
             {"turn": 2, "think": "", "tool": "search", "arguments": {"query_list": ["B magazine"]}, "ok": True,
              "titles": ["notes on magazines.pdf"], "answer": None, "recovery": None, "format_problems": []},
             {"turn": 2, "think": "", "tool": None, "arguments": {}, "ok": None, "titles": [], "answer": "A",
              "recovery": None, "format_problems": []}]
    return events + [StepTaken("r1", step=s) for s in steps] + [
        ReflectionDecided("r1", replan=False, round=1),
        VerdictReady("r1", label="correct", method="exact-match", ground_truth="A"),
        RunFinished("r1", answer="A", stats={"llm_calls": 6, "tool_calls": 2, "wall_seconds": 12.5}),
    ]


def test_the_report_has_the_question_answer_citations_with_their_text_plan_and_steps():
    report = report_markdown(run_events())
    assert report.startswith("# Research report: Which came first, A or B?")
    assert "- Status: final (after reflection)" in report and "- Right answer given: A" in report
    assert "## Answer\n\n**A** [1] [2]" in report
    assert "**Verdict:** correct (verified against the right answer), the right answer: A, by exact-match" in report
    sources = report.split("## Sources")[1].split("## Plan")[0]
    assert "1. **A** (wiki (hotpotqa))" in sources and "Cited sentence: “A (1844) was a magazine.”" in sources
    assert "   > A (1844) was a magazine.\n   > Its second line \\[link\\](javascript:x)." in sources  # as retrieved, inert
    assert ("2. **notes on magazines.pdf** (document notes on magazines.pdf (shared collection papers), page 3)"
            in sources)
    assert "   > B was started in 1989." in sources
    plan = report.split("## Plan")[1].split("## Steps")[0]
    assert "1. Search for A\n2. Search for B \\<script\\>alert('x')\\</script\\>" in plan  # escaped
    steps = report.split("## Steps")[1]
    assert "- Turn 1: search “A magazine” → A; Other\n  - Thought: look up A\n  - Recovery: guided turn: no evidence yet" in steps
    assert "- Turn 2: answered A" in steps
    assert "## Reflection\n\n- Round 1: the answer stands" in report
    assert "## Run summary\n\n6 LLM calls" in report
    assert "<script>" not in report


def person_feedback(right_answer: str | None = None, comment: str | None = None) -> FeedbackItem:
    return FeedbackItem(run_id="r1", namespace="alice", user="alice", question="Which came first, A or B?", answer="A",
                        thumbs="down", right_answer=right_answer, comment=comment, label_before="correct",
                        label_after="incorrect", judge_method="person", memory_id=None, at=1796385600.0)


def test_a_stopped_run_reports_the_steps_its_events_show_and_says_it_was_not_judged():
    report = report_markdown(run_events(stopped=True), feedback=person_feedback())
    assert "Status: stopped by the user: the answer so far, not judged, no memory stored" in report
    assert "Answer forced: stopped by the user" in report
    assert "Verdict" not in report and "- Marked **incorrect** by alice, 2026-12-04 12:00:00 UTC" in report
    steps = report.split("## Steps")[1]
    assert "- Turn 1: search “A magazine” → A; Other" in steps and "- Turn 2: search “B magazine”" in steps


def test_the_report_has_the_right_answer_a_person_typed_marked_as_their_correction_with_who_and_when():
    report = report_markdown(run_events(), feedback=person_feedback("B " + SCRIPT, comment="A came second"))
    feedback = report.split("## Feedback from a person")[1].split("## Sources")[0]
    assert ("- **Correction by a person**: the right answer is **B \\<script\\>alert('x')\\</script\\>** "
            "(typed by alice, 2026-12-04 12:00:00 UTC; a person's word, not the Judge's)") in feedback
    assert "- Comment: A came second" in feedback
    # The person's word is the run's label, in the words every view uses; the run's own verdict stays apart.
    assert ("**Verdict:** incorrect (you corrected it), the run's own verdict was correct (verified against the "
            "right answer)") in report
    assert "<script>" not in report


def test_the_run_json_holds_the_events_as_the_run_log_does():
    events = run_events()
    document = json.loads(run_json(events))
    assert (document["format"], document["version"], document["run_id"]) == ("mia-run", 1, "r1")
    restored = [event_from_dict(e) for e in document["events"]]
    assert restored == [e for e in events if not isinstance(e, TextDelta)]


def test_report_files_are_written_under_safe_names(tmp_path):
    md_path, json_path = write_report_files(run_events(), tmp_path)
    assert (md_path.name, json_path.name) == ("mia-report-r1.md", "mia-run-r1.json")
    assert md_path.read_text(encoding="utf-8").startswith("# Research report")
    assert report_names("../../etc/passwd") == ("mia-report-______etc_passwd.md", "mia-run-______etc_passwd.json")


def test_places_and_links_of_passages():
    assert document_place("doc://papers/a%2Fb.pdf#page=12").page == 12
    place = document_place("doc://shared/papers/dir/notes.md#section=Intro%20part")
    assert (place.collection, place.file, place.shared, place.section) == ("papers", "dir/notes.md", True, "Intro part")
    assert document_place("https://example.org") is None and document_place("doc://only") is None
    assert source_label({"source": "web", "url": "https://x.org"}) == "web search"
    assert source_label({"source": "doc:papers", "url": "doc://papers/a.pdf"}) == "document a.pdf (collection papers)"
    assert web_link("javascript:alert(1)") is None and web_link("doc://a/b") is None
    assert web_link("https://x.org/a b>c") == "https://x.org/a%20b%3Ec"
    assert escape_markdown_file("*[x](y)* <b>") == "\\*\\[x\\](y)\\* \\<b\\>"
    texts = [passage("T", "short"), passage("T", "a longer text with the sentence in it")]
    assert cited_passage({"title": "T", "url": None, "sentence": "the sentence"}, texts)["text"].startswith("a longer")
    assert cited_passage({"title": "Nope", "url": None}, texts) is None
