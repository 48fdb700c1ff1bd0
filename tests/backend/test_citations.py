"""A passage is cited only where its sentence states the answer about what the question (or a hop of its
plan) asks (backend.evidence.citations); the rest of what the run read is "also read"."""

from __future__ import annotations

from backend.evidence import citations, is_about
from backend.question import Question

DOCUMENT = {"title": "vellmark-tariffs.pdf, page 2", "source": "doc:vellmark", "url": "doc://mine/vellmark-tariffs.pdf#page=2",
            "text": "Harbour dues. The harbour of Vellmark charges 27 crowns per tonne of cargo landed."}
LAKE = {"title": "Lake Vell", "source": "wiki", "url": None,
        "text": "Lake Vell is a glacial lake in the north. It is 27 metres deep at its deepest point."}
ROUTE = {"title": "Nevada State Route 318", "source": "wiki", "url": None,
         "text": "State Route 318 is a state highway in Nye and White Pine counties in Nevada."}
QUESTION = Question.parse("How many crowns per tonne does the harbour of Vellmark charge for cargo?")


def test_a_padding_passage_that_only_shares_the_number_is_not_cited():
    cited = citations("27", QUESTION, [LAKE, DOCUMENT, ROUTE])
    assert [c["title"] for c in cited] == [DOCUMENT["title"]]
    assert "27 crowns per tonne" in cited[0]["sentence"] and cited[0]["n"] == 1


def test_a_title_holding_the_number_is_no_citation_of_it():
    question = Question.parse("How many pages long is the 1998 annual report of the Vellmark harbour board?")
    assert citations("318", question, [ROUTE]) == []


def test_a_passage_naming_what_the_question_names_is_cited():
    question = Question.parse("Where was the music festival Billy McFarland was charged with wire fraud for supposed to "
                              "take place?")
    festival = {"title": "Fyre Festival", "source": "wiki", "url": None,
                "text": "Fyre Festival was a fraudulent luxury music festival. It was scheduled to take place on the "
                        "Bahamian island of Great Exuma."}
    island = {"title": "Exuma", "source": "wiki", "url": None,
              "text": "Great Exuma is the largest of the Exuma cays, with a population of 3,000."}
    assert [c["title"] for c in citations("Great Exuma", question, [island, festival])] == ["Fyre Festival"]


def test_a_hops_question_and_its_stated_answer_count_for_the_citation():
    question = Question.parse("Which country was the director of Jaws born in?")
    director = {"title": "Steven Spielberg", "source": "wiki", "url": None,
                "text": "Steven Allan Spielberg is an American film director. He was born in Cincinnati in the United States."}
    film = {"title": "Jaws (film)", "source": "wiki", "url": None,
            "text": "Jaws is a 1975 American thriller film directed by Steven Spielberg."}
    hops = [(Question.parse("Who directed Jaws?"), "Steven Spielberg", "Jaws (film): Jaws is a 1975 American thriller film directed by "
             "Steven Spielberg."),
            (Question.parse("In which country was Steven Spielberg born?"), "United States", "Steven Spielberg: He was born in Cincinnati "
             "in the United States.")]
    cited = citations("United States", question, [film, director], hops=hops)
    assert [c["title"] for c in cited] == ["Steven Spielberg", "Jaws (film)"]  # the answer's, then the first hop's


def test_is_about_needs_a_name_or_two_words_of_the_question_beside_the_answer():
    assert is_about("It is 27 metres deep.", "Lake Vell", [QUESTION], "27") is False
    assert is_about("The harbour charges 27 crowns per tonne.", "Tariffs", [QUESTION], "27") is True
    assert is_about("He was born in Cincinnati.", "Steven Spielberg", [Question.parse("Where was Steven Spielberg born?")],
                    "Cincinnati")


def test_a_taught_answer_is_stated_only_by_a_passage_about_what_the_question_asks():
    from backend.taught import stating_about

    question = Question.parse("In which country is the Eiffel Tower?")
    statue = {"title": "Statue of Liberty", "text": "The Statue of Liberty is a colossal statue in the United States."}
    tower = {"title": "Eiffel Tower", "text": "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."}
    assert stating_about("United States", question, [statue]) == ""
    assert stating_about("France", question, [statue, tower]).startswith("Eiffel Tower: ")
