"""The brief that opens a report (app/brief.py) and the PDF report (app/report_pdf.py): composed from
the run's own cited sentences without a model call, every finding with a citation, what no sentence
states said as unverified, follow-ups of a thread numbered on; the run log moves to an appendix."""

from __future__ import annotations

import re

import pypdfium2 as pdfium

from app.brief import about, answer_sentence, compose_brief, unit_of
from app.report import APPENDIX, report_markdown
from app.report_pdf import report_pdf
from backend.events import AnswerReady, HopAnswered, RunFinished, RunStarted, ToolReturned, VerdictReady
from backend.feedback_queue import FeedbackItem
from backend.question import Question
from tests.app.test_report import SCRIPT, passage, run_events

BRIDGE = "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?"
FYRE = ("Fyre Festival", "The Fyre Festival was a fraudulent luxury music festival founded by Billy McFarland. "
        "It was scheduled to take place on the Bahamian island of Great Exuma.")


def bridge_run(run_id="b1", *, judged_only=True, second_hop_stated=True):
    """A plan of two sub-questions; the second hop's sentence states the answer, or none does."""
    events = [
        RunStarted(run_id, question=BRIDGE, namespace="default"),
        ToolReturned(run_id, turn=1, name="search", ok=True, content="...", passages=[
            passage(*FYRE), passage("Billy McFarland", "William McFarland is an American fraudster. " + SCRIPT)]),
        HopAnswered(run_id, turn=1, number=1, template="Which festival was Billy McFarland charged over?",
                    question="Which festival was Billy McFarland charged over?", answer="Fyre Festival",
                    sentence="Fyre Festival: The Fyre Festival was a fraudulent luxury music festival founded by "
                             "Billy McFarland."),
        HopAnswered(run_id, turn=2, number=2, template="Where was #1 to take place?",
                    question="Where was Fyre Festival to take place?", answer="Great Exuma",
                    sentence=("Fyre Festival: It was scheduled to take place on the Bahamian island of Great Exuma."
                              if second_hop_stated else "")),
        AnswerReady(run_id, text="Great Exuma", sources=[]),
    ]
    verdict = (VerdictReady(run_id, label="unsure", method="evaluators+arbiter") if judged_only
               else VerdictReady(run_id, label="correct", method="exact-match", ground_truth="Great Exuma"))
    return events + [verdict, RunFinished(run_id, answer="Great Exuma", stats={})]


def follow_up_run():
    return [RunStarted("f1", question="Who founded it?", namespace="default"),
            ToolReturned("f1", turn=1, name="search", ok=True, content="...", passages=[passage(*FYRE)]),
            AnswerReady("f1", text="Billy McFarland", sources=[
                {"n": 1, "title": "Fyre Festival", "url": None, "source": "wiki:hotpotqa",
                 "sentence": "The Fyre Festival was a fraudulent luxury music festival founded by Billy McFarland."}]),
            RunFinished("f1", answer="Billy McFarland", stats={})]


def test_the_answer_sentence_names_what_it_is_about_and_a_numbers_unit():
    assert unit_of("17", ["HARBOUR OF VELLMARK TARIFF 2025: 17 CROWNS PER TONNE"]) == "crowns per tonne"
    assert unit_of("1987", ["The reactor opened in 1987 after a decade."]) == ""  # a year has no unit
    assert unit_of("3,200", ["It seats 3,200 people in its hall."]) == "people"
    assert unit_of("12", ["It has 12 and more."]) == "" and unit_of("Paris", ["Paris is big."]) == ""
    assert about(Question.parse("Which magazine was started first, Arthur's Magazine or First for Women?"),
                 "Arthur's Magazine") == "Arthur's Magazine and First for Women"
    assert (answer_sentence("What tariff per tonne does the Vellmark notice state?", "17",
                            ["HARBOUR OF VELLMARK TARIFF 2025: 17 CROWNS PER TONNE"])
            == "The answer about Vellmark is 17 crowns per tonne")


def test_a_bridge_run_is_told_hop_by_hop_each_finding_cited_and_the_judges_opinion_unverified():
    brief = compose_brief([bridge_run()])
    assert brief.question == BRIDGE
    assert brief.answer == "The answer about Billy McFarland is Great Exuma"
    assert brief.answer_cites == [2]  # no citation on the answer: the last hop's sentence states it
    assert [f.cites for f in brief.findings] == [[1], [2]]
    assert brief.findings[0].text.startswith("Hop 1: Which festival was Billy McFarland charged over? → Fyre Festival.")
    assert "Great Exuma" in brief.sources[1].sentence and brief.sources[1].text.startswith("The Fyre Festival")
    assert any("the Judge's opinion" in item for item in brief.unverified)

    unstated = compose_brief([bridge_run(judged_only=False, second_hop_stated=False)])
    assert [f.cites for f in unstated.findings] == [[1]] and unstated.answer_cites == []
    assert any(item.startswith("Hop 2, “Where was Fyre Festival to take place?”, was answered Great Exuma: no "
                               "retrieved sentence states it") for item in unstated.unverified)
    assert any("No retrieved sentence states the answer “Great Exuma”" in item for item in unstated.unverified)


def test_the_report_opens_with_the_brief_every_claim_linked_to_its_source_and_the_log_in_an_appendix():
    report = report_markdown(bridge_run(), follow_ups=[follow_up_run()])
    brief, appendix = report.split(APPENDIX)
    assert brief.index("## Brief") < brief.index("**The question.**") < brief.index("**The answer.**")
    assert "## Plan" not in brief and "## Steps" not in brief and "## Answer" in appendix
    assert "**The answer.** The answer about Billy McFarland is Great Exuma [[2]](#source-2)." in brief
    found = brief.split("**How it was found.**")[1].split("**What stays unverified.**")[0].strip().splitlines()
    assert len(found) == 2 and all(re.search(r"\[\[\d\]\]\(#source-\d\)$", line) for line in found)
    # the follow-up's source is the same sentence as hop 1's: one source, one number
    assert "- Who founded it? → Billy McFarland [[1]](#source-1)" in brief
    for n in (1, 2):
        assert f'<a id="source-{n}"></a>**[{n}] Fyre Festival**' in brief
    assert "founded by Billy McFarland. **It was scheduled to take place on the Bahamian island of Great Exuma.**" in brief
    assert "<script>" not in report


def test_a_persons_correction_and_the_old_reports_sections_stay():
    feedback = FeedbackItem(run_id="r1", namespace="default", user="alice", question="q", answer="A", thumbs="down",
                            right_answer="B *really*", comment=None, label_before="correct", label_after="incorrect",
                            judge_method="ground truth", memory_id=None)
    report = report_markdown(run_events(), feedback=feedback)
    assert "**A person's correction.** A person corrected the answer: the right answer is B \\*really\\* (typed by alice)." in report
    assert "**The answer.** Of A and B, the answer is A [[1]](#source-1) [[2]](#source-2)." in report
    assert report.index("## Brief") < report.index(APPENDIX) < report.index("## Sources") < report.index("## Plan")


def test_the_pdf_report_has_the_brief_first_links_to_its_sources_and_the_log_after():
    data = report_pdf(bridge_run(), follow_ups=[follow_up_run()])
    document = pdfium.PdfDocument(data)
    try:
        first = document[0].get_textpage().get_text_range()
        rest = " ".join(document[i].get_textpage().get_text_range() for i in range(1, len(document)))
        assert re.search(r"Research report: Where was the music festival", first)
        assert first.index("Brief") < first.index("The question.") < first.index("How it was found.")
        assert "The answer about Billy McFarland is Great Exuma [2]." in " ".join(first.split())
        assert "Cited sources" in first and "Appendix: the run log" not in first
        assert "Appendix: the run log" in rest and "Steps" in rest
        links = [link for link in _links(document[0])]
        assert len(links) >= 4, "each citation [n] links to its source"
    finally:
        document.close()


def _links(page):
    import ctypes

    import pypdfium2.raw as raw

    index = ctypes.c_int(0)
    link = raw.FPDF_LINK()
    while raw.FPDFLink_Enumerate(page, ctypes.byref(index), ctypes.byref(link)):
        yield link
