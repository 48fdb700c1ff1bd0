import pytest

from backend.planner import parse_steps, search_query
from backend.prompts.manager import format_memories
from backend.question import Question


def test_numbered_steps_are_parsed_in_order_and_deduplicated():
    text = "1. Search Arthur's Magazine founding\n2) Search First for Women founding\nStep 3: compare\n3. compare\nnot a step"
    assert parse_steps(text) == ["Search Arthur's Magazine founding", "Search First for Women founding", "compare"]


def test_no_numbered_lines_gives_no_steps():
    assert parse_steps("Just search for it and answer.") == []


def test_step_cap():
    text = "\n".join(f"{i}. step {i}" for i in range(1, 12))
    assert len(parse_steps(text, max_steps=3)) == 3


def test_memories_block_shows_both_kinds_or_none_found():
    empty = format_memories([], [])
    assert "Successful strategies: none found." in empty and "Failure lessons: none found." in empty
    text = format_memories(
        [{"question": "Q1", "summary": "searched both", "correct": True}],
        [{"question": "Q2", "summary": "guessed", "correct": False, "caption": "a flag"}],
    )
    assert "(correct) Q: Q1" in text and "(incorrect) Q: Q2 Image: a flag." in text


def test_steps_that_state_facts_are_dropped_visibly():
    from backend.planner import Planner, split_actions

    kept, dropped = split_actions(["Search Arthur's Magazine", "The first magazine was Arthur's.", "Compare the years"])
    assert kept == ["Search Arthur's Magazine", "Compare the years"]
    assert dropped == ["The first magazine was Arthur's."]
    blueprint = Planner._blueprint("1. Paris is the answer.", None, ["Paris is the answer."], fallback="Search X")
    assert blueprint.steps == ["Search X"]
    assert "stated facts" in blueprint.recovered and "single search step" in blueprint.recovered


def test_cases_block_shows_plans_and_outcomes():
    from backend.prompts.manager import format_cases

    assert format_cases([]) == "Past cases: none found."
    text = format_cases([
        {"question": "Q1", "plan": "1. Search A\n2. Search B", "correct": True},
        {"question": "Q2", "plan": "", "correct": False},
    ])
    assert text.splitlines()[1:] == [
        "1. Q: Q1 Plan: 1. Search A 2. Search B Outcome: right answer",
        "2. Q: Q2 Plan: (none) Outcome: wrong answer",
    ]


# Steps of plans Qwen2.5-Coder-1.5B wrote for `train` questions (a teach-and-retest run's logs).
QWEN_TRAIN_STEPS = {
    "Search for information on Billy McFarland's alleged wire fraud charges.": "Billy McFarland's alleged wire fraud charges",
    "Identify the specific music festival mentioned in the charges.": None,
    "Cross-check the information with other reliable sources to ensure accuracy.": None,
    "Synthesize the findings to answer the question.": None,
    "Search for historical records and documents related to Alexander Kerensky's defeat and destruction by the "
    "Bolsheviks.": "historical records and documents related to Alexander Kerensky's defeat and destruction by the Bolsheviks",
    'Search for information on both "Hey Pa! There\'s a Goat on the Roof" and "Poleconomy".':
        'both "Hey Pa! There\'s a Goat on the Roof" and "Poleconomy"',
    "Compare the features, benefits, and drawbacks of each product.": None,
    "Synthesize the findings to determine which product came to market first.": None,
    # where to look is no part of a query; a step that quotes its one query is that query
    'Search for "Denmark southernmost administrative region" in a reliable news source or encyclopedia.':
        "Denmark southernmost administrative region",
    'Search for "The Million Dollar Duck" on the internet.': "The Million Dollar Duck",
    'Search for information about Kung Fu Magoo and her role in "Naruto" on reliable sources such as IMDb, '
    "Wikipedia, or other animation-related websites.": 'Kung Fu Magoo and her role in "Naruto"',
    "Search for Nate Albert's information on Capitol Records' website.": "Nate Albert's information on Capitol Records' website",
}


@pytest.mark.parametrize("step", list(QWEN_TRAIN_STEPS))
def test_only_a_search_step_becomes_a_query_and_without_its_opening(step):
    assert search_query(step) == QWEN_TRAIN_STEPS[step]


def test_the_executor_never_sends_a_plan_step_that_is_not_a_search_as_a_query(shared_tools, scripted_model_class):
    from backend.executor import ExecutorSession
    from backend.metering import RunMeter

    question = "What tariff per tonne does the notice of the Harbour of Vellmark state?"
    session = ExecutorSession(scripted_model_class("executor"), shared_tools, RunMeter(), "run-1", guided=True)
    session.start(Question.parse(question), ["Identify the text that states the landing tariff.",
                             "Extract the numerical value from the text.", "Search for the Vellmark port tariffs."])
    for query in (question, "Harbour of Vellmark"):
        list(session.search("search", query))
    assert session._unsearched_query(Question.parse(question)) == "the Vellmark port tariffs"
    list(session.search("search", "the Vellmark port tariffs"))
    assert session._unsearched_query(Question.parse(question)) is None  # the prose steps are never queries
