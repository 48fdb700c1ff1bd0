"""The Judge's verdicts say how they were reached and never pass a non-answer; the Manager's memories
are workflows from the run's own steps; answers cite the passages that state them."""

from __future__ import annotations

import pytest

from backend.evidence import citations
from backend.executor import Step
from backend.judge import CORRECT, INCORRECT, NOT_ATTEMPTED, UNSURE, Judge, answer_problem
from backend.manager import clean_plan_steps, type_by_wording, workflow_record, workflow_summary
from backend.question import Question

FYRE = "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?"
PASSAGES = [
    {"title": "Billy McFarland (entrepreneur)", "text": "Billy McFarland is an American fraudster. He founded the Fyre Festival."},
    {"title": "Fyre Festival", "text": "Fyre Festival was a fraudulent luxury music festival. It was scheduled to take place "
                                       "on the Bahamian island of Great Exuma in April 2017."},
]


@pytest.mark.parametrize("answer", ["", "The answer is:", "N/A", "I don't know", FYRE, "The music festival in",
                                    "Great Exuma (an island of", "Tulsa,"])
def test_a_non_answer_is_never_correct(scripted_model_class, answer):
    judge = Judge(scripted_model_class("judge", (), [CORRECT] * 8))
    assert answer_problem(FYRE, answer) is not None
    assert judge.grade(FYRE, answer, "Great Exuma").label == NOT_ATTEMPTED
    assert judge.evaluate_without_ground_truth(FYRE, answer, PASSAGES).label == NOT_ATTEMPTED


def test_naming_the_gold_inside_a_negation_is_not_a_match(scripted_model_class):
    question = "Which show did Ed Sullivan host?"
    judge = Judge(scripted_model_class("judge", (), [INCORRECT, CORRECT]))
    verdict = judge.grade(question, "No, Ed Sullivan never worked for The Ed Sullivan Show", "The Ed Sullivan Show")
    assert verdict.label == INCORRECT and verdict.method.startswith("llm-choice")
    assert "inside a negation" in verdict.feedback[0]
    assert Judge(scripted_model_class("judge")).grade(question, "The Ed Sullivan Show", "The Ed Sullivan Show").method == "exact-match"


def test_with_ground_truth_a_verdict_is_verified(scripted_model_class):
    verdict = Judge(scripted_model_class("judge")).grade(FYRE, "Great Exuma, Bahamas", "Great Exuma")
    assert (verdict.label, verdict.method, verdict.verified, verdict.source) == (CORRECT, "exact-match", True, "ground_truth")


def test_without_ground_truth_the_judge_is_unsure_of_an_answer_nothing_retrieved_states(scripted_model_class):
    judge = Judge(scripted_model_class("judge", (), ["yes", "yes", "yes", CORRECT]))
    verdict = judge.evaluate_without_ground_truth(FYRE, "Lisbon, Portugal", PASSAGES)
    assert verdict.label == UNSURE and not verdict.verified and verdict.source == "judge"
    assert verdict.feedback[-2].endswith("no retrieved sentence states this answer")
    assert verdict.feedback[-1].endswith("capped at 0.50: no evidence states the answer")  # read from no evidence
    assert verdict.confidence == 0.5
    assert verdict.evidence == ["Billy McFarland (entrepreneur)", "Fyre Festival"]


def test_without_ground_truth_the_judge_never_says_correct_only_which_way_it_leant(scripted_model_class):
    judge = Judge(scripted_model_class("judge", (), ["yes", "yes", "yes", CORRECT, "no", "no", "no", INCORRECT]))
    leaning = judge.evaluate_without_ground_truth(FYRE, "Great Exuma", PASSAGES)
    assert (leaning.label, leaning.leaning, leaning.leans_correct, leaning.verified) == (UNSURE, CORRECT, True, False)
    assert leaning.confidence == pytest.approx(0.993, abs=1e-3)  # the scripted arbiter: 0 vs -5 log-probability
    assert "without ground truth the Judge cannot confirm it" in leaning.feedback[-1]
    against = judge.evaluate_without_ground_truth(FYRE, "Lisbon", PASSAGES)
    assert (against.label, against.leans_correct) == (INCORRECT, False)


def test_the_grader_is_unsure_of_an_answer_sharing_no_word_with_the_gold(scripted_model_class):
    judge = Judge(scripted_model_class("judge", (), [CORRECT, INCORRECT, CORRECT, INCORRECT]))
    county = "In which county are the barracks located?"
    unsure = judge.grade(county, "Hawaii", "Honolulu")
    assert (unsure.label, unsure.leaning, unsure.verified) == (UNSURE, CORRECT, True)
    assert judge.grade("Who bought the company?", "Rockefeller", "John D Rockefeller's Standard Oil").label == CORRECT


def test_an_option_or_a_name_from_the_question_is_no_echo():
    assert answer_problem("Which was released first, The Greatest Game Ever Played or Hot Lead and Cold Feet?",
                          "Hot Lead and Cold Feet") is None
    assert answer_problem("What did the residence become once it became Atatürk Museum Mansion?",
                          "Atatürk Museum Mansion") is None


def test_a_workflow_summary_says_what_was_searched_found_and_why_it_failed():
    search = Step(turn=1, tool="search", arguments={"query_list": ["Billy McFarland wire fraud"]}, ok=True,
                  titles=["Billy McFarland (entrepreneur)", "Fyre Festival"])
    repeat = Step(turn=2, tool="search", arguments={"query_list": ["Billy McFarland wire fraud"]}, ok=True,
                  titles=["Billy McFarland (entrepreneur)"])
    summary = workflow_summary(question=Question.parse(FYRE), steps=[search, repeat, Step(turn=3, answer="The Fyre Festival")],
                               passages=PASSAGES, answer="The Fyre Festival", verdict=INCORRECT, verified=True,
                               ground_truth="Great Exuma")
    assert summary.count("Billy McFarland wire fraud") == 1  # no repeated steps
    assert "found Billy McFarland (entrepreneur), Fyre Festival" in summary
    assert "incorrect (verified)" in summary
    assert "'Great Exuma' was in a retrieved passage (Fyre Festival) but was not read from it" in summary
    missed = workflow_summary(question=Question.parse(FYRE), steps=[search], passages=PASSAGES[:1], answer="Lisbon",
                              verdict=INCORRECT, verified=True, ground_truth="Great Exuma")
    assert "was in no retrieved passage: the searches missed it" in missed
    unverified = workflow_summary(question=Question.parse(FYRE), steps=[search], passages=PASSAGES, answer="Lisbon",
                                  verdict=CORRECT, verified=False)
    assert "the Judge, without ground truth, said correct (unverified)" in unverified


def test_a_closed_question_missed_is_not_said_to_have_missed_a_passage_stating_its_answer():
    """A yes/no answer, or an option the question names, is stated by no passage: a lesson saying the
    searches missed it sends the next Planner searching for what was in front of the reader."""
    question = Question.parse("Are Out Traveler and Reader's Digest both magazines?")
    search = Step(turn=1, tool="search", arguments={"query_list": ["Out Traveler"]}, ok=True, titles=["Out Traveler"])
    passages = [{"title": "Out Traveler", "text": "Out Traveler is a gay and lesbian travel magazine."}]
    summary = workflow_summary(question=question, steps=[search], passages=passages, answer="no",
                               verdict=INCORRECT, verified=True, ground_truth="yes")
    assert "The right answer, of those the question allows, was 'yes'." in summary
    assert "retrieved passage" not in summary
    assert workflow_record(question=question, steps=[search], passages=passages, support=None,
                         ground_truth="yes")["gold_retrieved"] is None
    assert workflow_record(question=Question.parse(FYRE), steps=[search], passages=PASSAGES, support=None,
                         ground_truth="Great Exuma")["gold_retrieved"] is True


def test_a_stored_plan_holds_each_step_once_and_never_the_answer():
    steps = ["Search for Billy McFarland", "Search for billy mcfarland", "Confirm that Lisbon hosted it", "Find the venue"]
    assert clean_plan_steps(steps, "Lisbon", FYRE) == ["Search for Billy McFarland", "Find the venue"]


@pytest.mark.parametrize(("question", "kind"), [
    (FYRE, "location"),
    ("Who directed the film that won Best Picture in 1998?", "human"),
    ("In what year was the band founded?", "time"),
    ("What job did Jörgen Smit work?", "career"),
    ("Were H. G. Wells and Rubén Darío both English?", "property"),
    ("Which magazine was started first, Arthur's Magazine or First for Women?", "property"),
    ("How many members does the band have?", "property"),
])
def test_question_types_come_from_the_wording(question, kind):
    assert type_by_wording(Question.parse(question)) == kind


def test_an_answer_cites_the_passages_that_state_it():
    cited = citations("Great Exuma", Question.parse(FYRE), PASSAGES)
    assert [(c["n"], c["title"]) for c in cited] == [(1, "Fyre Festival")]
    assert "Bahamian island of Great Exuma" in cited[0]["sentence"]
    assert citations("Lisbon", Question.parse(FYRE), PASSAGES) == []  # nothing retrieved states it
    choice = Question.parse("Which was founded first, Arthur's Magazine or First for Women?")
    magazines = [{"title": "Arthur's Magazine", "text": "Arthur's Magazine was founded in 1844."},
                 {"title": "JavaScript", "text": "JavaScript is a language."},
                 {"title": "First for Women", "text": "First for Women was started in 1989."}]
    assert [c["title"] for c in citations("Arthur's Magazine", choice, magazines)] == ["Arthur's Magazine", "First for Women"]
