"""Which wiki pages a retrieved paragraph names (whole names only), and the one a question needs next.
Unit rules on made-up titles; the search tool's choice on the real sandbox wiki."""

from __future__ import annotations

from dataclasses import asdict

from backend.tools.page_links import PageLinks, base_name, next_page
from backend.tools.search import WikiSearchTool

HARD_WAY = "Who starred in the 1991 American action comedy film The Hard Way and was featured on the roster of Rawkus Records?"


def test_a_page_is_named_by_its_whole_name_without_its_disambiguating_tail():
    links = PageLinks(["Mos Def", "Las Vegas Outlaws (XFL)", "Salem, New Hampshire", "Fox", "School", "Black",
                       "Matt Groening", "Night", "lowercase page", "Ox"])
    text = ('Stephen Lang, Annabella Sciorra, Mos Def, and Lewis Black appear with Michael J. Fox. He played for the '
            'Las Vegas Outlaws of the XFL at Jefferson High School in Salem, New Hampshire. Cartoonist Matt Groening '
            'drew "Good Night" and a lowercase page.')
    assert links.named_in(text) == ["Mos Def", "Las Vegas Outlaws (XFL)", "Salem, New Hampshire", "Matt Groening"]
    assert base_name("Las Vegas Outlaws (XFL)") == "Las Vegas Outlaws"
    # Where a name is a plain article's title and the tail of others', the plain article is meant.
    series = PageLinks(["SpongeBob SquarePants", "SpongeBob SquarePants (season 3)", "Into the Badlands (TV series)"])
    assert series.named_in("Set in SpongeBob SquarePants and Into the Badlands.") == [
        "SpongeBob SquarePants", "Into the Badlands (TV series)"]
    # A name at the very start of a text, and one ending a sentence, are named too.
    assert links.named_in("Fox is a network. It bought School.") == ["Fox", "School"]


def test_the_next_page_is_the_named_one_whose_text_matches_the_question_best():
    candidates = {"Mos Def": "Mos Def is an American rapper signed to Rawkus Records.",
                  "Circus": "A circus is a company of performers."}
    assert next_page(HARD_WAY, candidates) == "Mos Def"
    assert next_page("Which year?", {"Circus": "A circus is a company of performers."}) is None
    assert next_page(HARD_WAY, {}) is None


def test_the_search_tool_follows_a_retrieved_paragraph_to_the_page_a_bridge_question_needs(wiki_index):
    search = WikiSearchTool(wiki_index)
    first = [asdict(p) for p in search.run({"query_list": ["The Hard Way (1991 film)"]})[1]][:1]
    assert first[0]["title"] == "The Hard Way (1991 film)"
    assert search.linked_page(HARD_WAY, first) == ("Mos Def", "The Hard Way (1991 film)")
    # A page already retrieved, one the question itself names, or one hidden from the search is not a link to follow.
    mos_def = asdict(search.run({"query_list": ["Mos Def"]})[1][0])
    def followed(link):
        return link.title if link else None

    assert followed(search.linked_page(HARD_WAY, first + [mos_def])) not in (None, "Mos Def")
    assert followed(search.linked_page(HARD_WAY.replace("Rawkus Records", "Mos Def"), first)) != "Mos Def"
    assert followed(search.hiding(["Mos Def"]).linked_page(HARD_WAY, first)) != "Mos Def"
    # Passages that are not the wiki's own (a user's document, a web page) name no wiki page.
    assert search.linked_page(HARD_WAY, [{**first[0], "source": "doc:notes.pdf"}]) is None
