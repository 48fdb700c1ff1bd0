"""Two-option comparisons: which way a question compares, the dates and amounts read from each
option's fact, and the decision; then the Executor's reader using them with a larger model (real
wiki search, scripted model outputs)."""

from __future__ import annotations

import time

from backend.fact_comparison import Comparison, comparison_of, decide, first_date, first_number
from backend.events import AnswerReady, ExecutorThought, Recovery, ToolCalled
from backend.executor import ExecutorSession
from backend.metering import RunMeter
from backend.prompts.executor import CHOICE_PREFILL
from backend.question import Question

BORN_FIRST = "Who was born first, Marino Girolami or Daniel Myrick?"
GUN_DOG = "Which is a type of gun dog, the Labrador Retriever or the Tibetan Terrier?"


def test_the_direction_of_a_comparison_is_read_from_its_wording():
    assert comparison_of("Who was older, George Atzerodt or Andrew Johnson?") == Comparison("date", wants_smallest=True)
    assert comparison_of("Which band was formed first, Wavves or Social Code?") == Comparison("date", True)
    assert comparison_of("Who was born more recently, Gunnar Nelson or Florence Welch?") == Comparison("date", False)
    assert comparison_of("who is younger Ulrich Walter or Luca Parmitano?") == Comparison("date", False)
    assert comparison_of("Which genus has more species in it, Othonna or Stangeria?") == Comparison("number", False)
    assert comparison_of("Which city has fewer inhabitants, Ely or Wells?") == Comparison("number", True)
    assert comparison_of(GUN_DOG) is None
    assert comparison_of("Which restaurant chain's headquarters is further north, Pizza Inn or Papa Gino's?") is None


def test_dates_are_read_in_the_forms_paragraphs_write_them():
    assert first_date("born 12 September 1835 in Dorna") == (1835, 9, 12)
    assert first_date("born September 12, 1835; died July 7, 1865") == (1835, 9, 12)
    assert first_date("founded in March 1868") == (1868, 3, 0)
    assert first_date("released in 1996, re-released 2004") == (1996, 0, 0)
    assert first_date("c. 500 BC") == (-500, 0, 0)
    assert first_date("an American rock band") is None
    assert first_number("about 1,200 species") == 1200
    assert first_number("3.5 million people") == 3_500_000
    assert first_number("many species") is None


def test_a_comparison_is_decided_only_when_both_facts_give_comparable_values():
    older = Comparison("date", wants_smallest=True)
    assert decide(older, {"George Atzerodt": "born June 12, 1835", "Andrew Johnson": "born December 29, 1808"}) == "Andrew Johnson"
    assert decide(Comparison("date", False), {"A": "1999", "B": "2004"}) == "B"
    assert decide(Comparison("number", False), {"Othonna": "about 120 species", "Stangeria": "one species, 1"}) == "Othonna"
    assert decide(older, {"A": "an American actor", "B": "born 1950"}) is None  # no date for A
    assert decide(older, {"A": "born 1950", "B": "born 3 May 1950"}) is None  # a year against a date in it
    assert decide(older, {"A": "1950", "B": "1950"}) is None


def read(model, tools, question, queries, **kwargs):
    session = ExecutorSession(model, {"search": tools["search"]}, RunMeter(), "run", guided=True, **kwargs)
    session.start(Question.parse(question), [])
    for query in queries:
        list(session.search("search", query))
    generator, events = session.read_answer(Question.parse(question)), []
    while True:
        try:
            events.append(next(generator))
        except StopIteration as stop:
            return stop.value, events, session


def test_a_date_comparison_is_decided_from_the_facts_the_model_copied(larger_model_class, shared_tools):
    model = larger_model_class("executor", ["born 1 February 1914", "born 1963"], choices=["Daniel Myrick"])
    answer, events, session = read(model, shared_tools, BORN_FIRST, ["Marino Girolami", "Daniel Myrick"])
    assert answer == "Marino Girolami"
    assert list(model.choices) == ["Daniel Myrick"]  # the model's own choice was never asked for
    # Each fact line is prefilled with its option, after the lines before it (one growing prefix).
    assert model.prefills == ["Marino Girolami:", "Marino Girolami: born 1 February 1914\nDaniel Myrick:"]
    facts = next(e for e in events if isinstance(e, ExecutorThought)).text
    assert facts == "Marino Girolami: born 1 February 1914\nDaniel Myrick: born 1963"
    assert any(isinstance(e, Recovery) and "decided from the options' facts" in e.action for e in events)
    # The facts were copied from the searched conversation, which holds both options' paragraphs.
    assert "<tool_response>" in model.prompts[0][-1]["content"]
    assert {"Marino Girolami", "Daniel Myrick"} <= set(session.read_from)


def test_a_comparison_without_values_is_chosen_with_the_facts_in_view(larger_model_class, shared_tools):
    model = larger_model_class("executor", ["a British gun dog breed", "a breed of dog from Tibet"],
                               choices=["Labrador Retriever"])
    answer, events, _ = read(model, shared_tools, GUN_DOG, ["Labrador Retriever", "Tibetan Terrier"])
    assert answer == "Labrador Retriever" and not model.choices
    assert model.prefills[-1] == ("Labrador Retriever: a British gun dog breed\n"
                                  "Tibetan Terrier: a breed of dog from Tibet\n" + CHOICE_PREFILL)


def test_facts_by_kind_asks_for_what_the_question_compares(larger_model_class, shared_tools):
    def asked(question, queries, facts, **kwargs):
        model = larger_model_class("executor", facts, choices=[queries[0]])
        read(model, shared_tools, question, queries, **kwargs)
        return model.prompts[0][-1]["content"]

    kind = asked(GUN_DOG, ["Labrador Retriever", "Tibetan Terrier"], ["a gun dog", "a dog from Tibet"], facts_by_kind=True)
    assert "(a short phrase: what it is, or where it is from)" in kind and "a date" not in kind
    date = asked(BORN_FIRST, ["Marino Girolami", "Daniel Myrick"], ["1914", "1963"], facts_by_kind=True)
    assert "the fact the question turns on (a date)" in date
    amount = asked("Which genus has more species in it, Othonna or Stangeria?", ["Othonna", "Stangeria"],
                   ["about 120 species", "one species"], facts_by_kind=True)
    assert "(a number and what it counts)" in amount
    # Off (the default), the hint lists every kind whatever the question compares.
    assert "(a date, a number or a short phrase)" in asked(GUN_DOG, ["Labrador Retriever", "Tibetan Terrier"],
                                                          ["a gun dog", "a dog from Tibet"])


def test_the_plain_choice_and_a_small_model_skip_the_facts(larger_model_class, scripted_model_class, shared_tools):
    plain = larger_model_class("executor", [], choices=["Daniel Myrick"])
    answer, events, _ = read(plain, shared_tools, BORN_FIRST, ["Marino Girolami"], compare_by_facts=False)
    assert answer == "Daniel Myrick" and plain.prefills == [CHOICE_PREFILL]
    small = scripted_model_class("executor", [], choices=["Daniel Myrick"])
    answer, events, _ = read(small, shared_tools, BORN_FIRST, ["Marino Girolami"])
    assert answer == "Daniel Myrick" and not any(isinstance(e, ExecutorThought) for e in events)
    # A yes/no question is chosen without facts.
    yes_no = larger_model_class("executor", [], choices=["no"])
    answer, events, _ = read(yes_no, shared_tools, "Were both Peter Duffell and Fred Niblo actors?", ["Peter Duffell"])
    assert answer == "no" and yes_no.prefills == [CHOICE_PREFILL]


def test_an_open_question_read_by_quote_answers_with_the_quoted_line_in_view(larger_model_class, shared_tools):
    question = "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?"
    quote = " The Fyre Festival was to take place on the island of Great Exuma."
    model = larger_model_class("executor", [quote, " Great Exuma"])
    answer, events, _ = read(model, shared_tools, question, ["Fyre Festival"], read_by_quote=True)
    assert answer == "Great Exuma"
    assert model.prefills == ["Sentence:", "Sentence: " + quote.strip() + "\nAnswer:"]
    assert next(e for e in events if isinstance(e, ExecutorThought)).text == "Sentence:" + quote
    # The default reads the answer straight away, without the line.
    plain = larger_model_class("executor", [" Great Exuma"])
    answer, events, _ = read(plain, shared_tools, question, ["Fyre Festival"])
    assert answer == "Great Exuma" and not any(isinstance(e, ExecutorThought) for e in events)


def test_a_quote_no_retrieved_sentence_holds_is_read_as_written(larger_model_class, shared_tools):
    question = "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?"
    invented = " Billy McFarland was charged with wire fraud for the festival supposed to take place in Miami."
    kept = larger_model_class("executor", [invented, " Miami"])
    answer, events, _ = read(kept, shared_tools, question, ["Fyre Festival"], read_by_quote=True)
    assert answer == "Miami" and kept.prefills[-1] == "Sentence: " + invented.strip() + "\nAnswer:"
    assert not any(isinstance(e, Recovery) for e in events)


def test_a_guided_draft_is_read_plain_and_the_final_answer_by_quote(larger_model_class, shared_tools):
    # The quoted sentence of a first search is often the first hop's ("charged ... in Manhattan"), which
    # the results state: read by quote, that draft would end the search one hop short.
    question = "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?"
    quote = " The Fyre Festival was a music festival scheduled to take place on the Bahamian island of Great Exuma."
    model = larger_model_class("executor", ["Billy McFarland", "Fyre Festival", "Fyre Festival", "Great Exuma",
                                                  quote, " Great Exuma"])
    session = ExecutorSession(model, {"search": shared_tools["search"]}, RunMeter(), "run", guided=True, read_by_quote=True)
    session.start(Question.parse(question), [])
    events = list(session.run(Question.parse(question), max_turns=4, deadline=time.monotonic() + 60))
    assert [e.arguments["query_list"][0] for e in events if isinstance(e, ToolCalled)] == ["Billy McFarland", "Fyre Festival"]
    answer = next(e for e in events if isinstance(e, AnswerReady))
    assert answer.text == "Great Exuma"
    # Both drafts ("Fyre Festival", the question's own entity, then "Great Exuma") were read plain; only
    # the final answer by quote.
    answer_prefills = [p for p in model.prefills if p.endswith(("Answer:", "Sentence:"))]
    assert answer_prefills == ["Answer:", "Answer:", "Sentence:", "Sentence: " + quote.strip() + "\nAnswer:"]
    assert any(isinstance(e, ExecutorThought) and e.text == "Sentence:" + quote for e in events)
