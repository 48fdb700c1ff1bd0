"""Plans of sub-questions (agent.plan_shape = "subquestions"): the Planner's decomposition parsed, each
hop researched and read on its own with earlier answers filled in, the weakest hop redone, the
decomposition kept in memory and shown to a later Planner as a worked example. The real loop, store
and search index; scripted models say what a model would write."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.render_html import transcript_of
from app.render_text import event_to_text
from backend.agent import ResearchAgent, RunRequest
from backend.events import AnswerReady, HopAnswered, MemoryStored, PlanReady, ReflectionDecided
from backend.hops import Hop, answering_hop, each_of_pair, fill, parse_subquestions, weakest, worked_examples, yes_no_answer
from backend.prompts.executor import question_turn
from backend.prompts.planner import decompose_messages, worked_examples_text
from backend.question import Question
from backend.replay import replay
from backend.runlog import RunLog
from memory_db import MemoryStore
from tests.backend.conftest import scripted_config
from tests.training.hops_example import DECOMPOSITION, FESTIVAL


def test_a_decomposition_is_read_as_numbered_sub_questions_referring_back():
    assert parse_subquestions(DECOMPOSITION) == [
        "Which music festival was Billy McFarland charged with wire fraud for?", "Where was #1 supposed to take place?"]
    assert parse_subquestions("1. Who wrote Dracula?\n2) In which city was #1 born?\n3. Which river flows through #2?"
                              "\n4. What is #3 called?") == [
        "Who wrote Dracula?", "In which city was #1 born?", "Which river flows through #2?"]  # at most three
    assert parse_subquestions("1. Who founded #2?\n2. What is Acme?") == []  # a reference forward makes no plan
    assert parse_subquestions("1. When was A born?\n2. when was a born?\nThe answer is A.") == ["When was A born?"]
    assert fill("Where was #1 supposed to take place?", ["Fyre Festival"]) == "Where was Fyre Festival supposed to take place?"
    assert fill("In which city was #1 born?", [""]) == "In which city was #1 born?"  # no answer yet: left as written


@pytest.fixture
def ask(tmp_path, shared_tools, embedder, scripted_model_class):
    config = scripted_config(tmp_path, plan_shape="subquestions", min_memory_similarity=-1.0)
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    models = {}

    def run(question, planner, reader, ground_truth="Great Exuma", choices=(), **agent_settings):
        """`agent_settings`: [agent] settings other than the fixture's."""
        models.update(planner=scripted_model_class("planner", planner),
                      executor=scripted_model_class("executor", reader, choices),
                      judge=scripted_model_class("judge"), manager=scripted_model_class("manager"))
        run_config = replace(config, agent=replace(config.agent, **agent_settings))
        agent = ResearchAgent(run_config, models=models, tools=shared_tools, store=store,
                              runlog=RunLog(config.runs_dir))
        return list(agent.run(RunRequest(question, namespace="alice", ground_truth=ground_truth)))

    run.models, run.store = models, store
    yield run
    store.close()


def test_each_hop_is_searched_and_read_on_its_own_with_the_earlier_answer_filled_in(ask):
    events = ask(FESTIVAL, [DECOMPOSITION], ["Fyre Festival", "Great Exuma"])
    plan = next(e for e in events if isinstance(e, PlanReady))
    assert plan.steps == parse_subquestions(DECOMPOSITION)
    hops = [e for e in events if isinstance(e, HopAnswered)]
    assert [(h.number, h.answer) for h in hops] == [(1, "Fyre Festival"), (2, "Great Exuma")]
    assert hops[1].question == "Where was Fyre Festival supposed to take place?"
    assert hops[1].queries[0] == hops[1].question  # the second hop is searched with the first one's answer
    assert all(h.sentence for h in hops) and "Great Exuma" in hops[1].sentence
    reader_asks = [m[-1]["content"] for m in ask.models["executor"].prompts]
    assert len(reader_asks) == 2 and "Question: Where was Fyre Festival supposed to take place?" in reader_asks[1]
    answer = [e for e in events if isinstance(e, AnswerReady)][-1]
    assert answer.text == "Great Exuma" and answer.sources
    assert not any(isinstance(e, ReflectionDecided) for e in events)  # every hop is stated: nothing to redo
    assert "hop 2" in event_to_text(hops[1]).lower() and "Great Exuma" in event_to_text(hops[1])
    trace = transcript_of(events).trace_html()
    assert replay(events).hops == hops and "🧩 Hop 2" in trace
    assert "🧩 Plan of sub-questions" in trace and "→ <b>Fyre Festival</b>" in trace  # each sub-question with its answer

    stored = ask.store.get(next(e for e in events if isinstance(e, MemoryStored)).memory_id, namespace="alice")
    assert [h["answer"] for h in stored.provenance["decomposition"]] == ["Fyre Festival", "Great Exuma"]
    examples = worked_examples([{"question": stored.question, "correct": True, "verified": True,
                                 "decomposition": stored.provenance["decomposition"]}])
    shown = decompose_messages("Where was the festival Ja Rule promoted held?", worked_examples_text(examples))[-1]["content"]
    assert "Where was #1 supposed to take place?\n(worked for an earlier question: the answer was right)" in shown


def test_a_hop_no_sentence_states_is_redone(ask):
    # The reader says "Lisbon" for the first hop twice (no retrieved sentence states it), then, on the
    # redo, the festival; the second hop is then asked with it.
    events = ask(FESTIVAL, [DECOMPOSITION], ["Lisbon", "Lisbon", "Lisbon", "Lisbon", "Fyre Festival", "Great Exuma"])
    assert any(isinstance(e, ReflectionDecided) and e.replan for e in events)
    redo = [e for e in events if isinstance(e, PlanReady) and e.revision == 1]
    assert redo and redo[0].steps[0] == parse_subquestions(DECOMPOSITION)[0]
    hops = [e for e in events if isinstance(e, HopAnswered)]
    assert hops[0].answer == "Lisbon" and not hops[0].sentence
    assert [e for e in events if isinstance(e, AnswerReady)][-1].text == hops[-1].answer


def test_a_hop_about_an_earlier_answer_is_stated_only_by_a_passage_naming_it(ask):
    # "Sundance" stands in a retrieved sentence, but of a passage about a Greek film, not Fyre Festival.
    events = ask(FESTIVAL, [DECOMPOSITION], ["Fyre Festival"] + ["Sundance"] * 6)
    hops = [e for e in events if isinstance(e, HopAnswered)]
    assert hops[0].sentence and hops[1].question == "Where was Fyre Festival supposed to take place?"
    assert hops[1].answer == "Sundance" and not hops[1].sentence
    assert hops[1].queries[1] == "Fyre Festival"  # searched again by its name
    assert any(isinstance(e, ReflectionDecided) and e.replan for e in events)


def test_a_hop_answered_with_what_it_names_is_not_stated(ask):
    from backend.hops import restates_its_subject

    # Qwen-1.5B on a `train` hop: the person the sub-question names, not the cousin it asks for.
    assert restates_its_subject("Damon Lamon Stoudamire", Question.parse("Who is Damon Stoudamire's cousin?"))
    assert not restates_its_subject("Terrence Jones", Question.parse("Who is Damon Stoudamire's cousin?"))
    assert not restates_its_subject("Claudio Javier López", Question.parse("What is Claudio López's full name?"))  # asks a name
    assert not restates_its_subject("Carrie Akre", Question.parse("Who is older, Carrie Akre or Shifty Shellshock?"))  # a choice
    events = ask(FESTIVAL, [DECOMPOSITION], ["Billy McFarland (entrepreneur)"] * 6)  # a retrieved title
    first = [e for e in events if isinstance(e, HopAnswered)][0]
    assert first.answer == "Billy McFarland (entrepreneur)" and not first.sentence and len(first.queries) == 2


def test_hops_side_by_side_leave_the_answer_to_a_reading_of_the_question(ask):
    side_by_side = ("1. Which music festival was Billy McFarland charged with wire fraud for?\n"
                    "2. Where was the music festival supposed to take place?")  # builds on no earlier answer
    events = ask(FESTIVAL, [side_by_side], ["Fyre Festival", "Great Exuma", "Great Exuma, the Bahamas"])
    hops = [e for e in events if isinstance(e, HopAnswered)]
    assert [h.answer for h in hops] == ["Fyre Festival", "Great Exuma"]
    answer = [e for e in events if isinstance(e, AnswerReady)][-1]
    assert answer.text == "Great Exuma, the Bahamas"  # read for the question, not the last hop's
    assert "Question: " + FESTIVAL in ask.models["executor"].prompts[-1][-1]["content"]


def test_a_yes_no_question_is_answered_from_hops_that_each_ask_yes_or_no(ask):
    question = "Were H. G. Wells and Rubén Darío both English?"
    plan = "1. Was H. G. Wells English?\n2. Was Rubén Darío English?"
    events = ask(question, [plan], [], ground_truth="no", choices=["yes", "no"])
    hops = [e for e in events if isinstance(e, HopAnswered)]
    assert [(h.question, h.answer) for h in hops] == [("Was H. G. Wells English?", "yes"), ("Was Rubén Darío English?", "no")]
    assert [len(h.queries) for h in hops] == [1, 1]  # read with the page it asks about: not searched again
    assert [e for e in events if isinstance(e, AnswerReady)][-1].text == "no"
    assert not any(isinstance(e, ReflectionDecided) and e.replan for e in events)  # no sentence states "no": nothing to redo
    asked = [m[-1]["content"] for m in ask.models["executor"].prompts]
    assert not any(question in text.split("\n")[-1] or f"Question: {question}" in text for text in asked)  # never read whole


def test_a_yes_no_question_about_two_things_is_asked_of_each_when_the_planner_writes_no_such_hops(ask):
    question = "Were H. G. Wells and Rubén Darío both English?"
    events = ask(question, ["1. Were H. G. Wells and Rubén Darío both English?"], [], ground_truth="no", choices=["yes", "no"])
    plan = next(e for e in events if isinstance(e, PlanReady))
    assert plan.steps == ["Was H. G. Wells English?", "Was Rubén Darío English?"]
    assert plan.recovered.endswith("but a yes/no question about two things is asked of each instead")
    hops = [e for e in events if isinstance(e, HopAnswered)]
    assert [(h.question, h.answer) for h in hops] == [("Was H. G. Wells English?", "yes"), ("Was Rubén Darío English?", "no")]
    assert [e for e in events if isinstance(e, AnswerReady)][-1].text == "no"


def test_what_is_asked_of_two_things_is_asked_of_one():
    assert each_of_pair(Question.parse("Are  Chrysalis and Look both women's magazines?")) == [
        "Is Chrysalis a women's magazine?", "Is Look a women's magazine?"]
    assert each_of_pair(Question.parse("Were Daniel Mann and Todd Solondz both directors?")) == [
        "Was Daniel Mann a director?", "Was Todd Solondz a director?"]
    assert each_of_pair(Question.parse("Are Apple and Orange both American companies?")) == [
        "Is Apple an American company?", "Is Orange an American company?"]
    assert each_of_pair(Question.parse("Have Tionne Watkins and Park So-yeon both been members of a girl group?")) == [
        "Has Tionne Watkins been members of a girl group?", "Has Park So-yeon been members of a girl group?"]
    assert each_of_pair(Question.parse("Are Ana Kasparian and Katherine Sarafian both Armenian-")) == [
        "Is Ana Kasparian Armenian?", "Is Katherine Sarafian Armenian?"]
    # where the second name ends is a guess; a choice between the two; an open question; no names
    assert each_of_pair(Question.parse("Are both Deerhunter and Nine Lashes American Christian rock bands?")) == []
    assert each_of_pair(Question.parse("Were H. G. Wells and Rubén Darío both English, or neither?")) == []
    assert each_of_pair(Question.parse("Who were H. G. Wells and Rubén Darío both influenced by?")) == []
    assert each_of_pair(Question.parse("Are cats and dogs both mammals?")) == []


def test_only_yes_no_hops_answer_a_yes_no_question():
    def hop(number, question, answer):
        return Hop(number, question, question=question, answer=answer)

    both = [hop(1, "Was H. G. Wells English?", "yes"), hop(2, "Was Rubén Darío English?", "yes")]
    assert yes_no_answer(both, Question.parse("Were H. G. Wells and Rubén Darío both English?")) == "yes"
    assert yes_no_answer([both[0], hop(2, "Was Rubén Darío English?", "no")], Question.parse("Were both English?")) == "no"
    assert yes_no_answer([both[0], hop(2, "Where was Rubén Darío born?", "Metapa")], Question.parse("Were both English?")) is None
    assert yes_no_answer(both, Question.parse("Who was English, H. G. Wells or Rubén Darío?")) is None  # a choice between them
    assert yes_no_answer(both[:1], Question.parse("Was H. G. Wells English?")) is None  # one hop: the question itself is read
    assert weakest(both) is None and weakest([hop(1, "Where was Rubén Darío born?", "Metapa")]).number == 1


def test_a_last_hop_that_checks_what_the_question_gives_does_not_answer_it():
    def hops(*pairs):
        return [Hop(number=i, template=t, question=t, answer=a) for i, (t, a) in enumerate(pairs, 1)]

    footballer = "Which retired Argentine footballer who played as a forward was a main player for Valencia CF?"
    checked = hops(("Who was a retired Argentine footballer who played as a forward?", "Claudio López"),
                   ("Which team did #1 play for?", "Valencia CF"))  # the team the question names
    assert answering_hop(checked, Question.parse(footballer)).answer == "Claudio López"
    sport = "Which sport has been played at the BayArena in Leverkusen, Germany, since 1958?"
    dated = hops(("What sport is played at the BayArena?", "Football"), ("When was #1 first played?", "1888"))
    assert answering_hop(dated, Question.parse(sport)).answer == "Football"  # a date the question does not ask for
    asked_when = "In which year did the division where the Browns placed fourth adopt its current name?"
    assert answering_hop(hops(("Which division did the Browns place fourth in?", "AFC North"),
                              ("When did #1 adopt its current name?", "2002")), Question.parse(asked_when)).answer == "2002"
    bridge = hops(("Which music festival was Billy McFarland charged for?", "Fyre Festival"),
                  ("Where was #1 supposed to take place?", "Great Exuma"))
    assert answering_hop(bridge, Question.parse(FESTIVAL)).answer == "Great Exuma"
    assert answering_hop(hops(("Who was charged with fraud?", "Billy McFarland"),
                              ("Where was #1 charged?", "Manhattan")), Question.parse(FESTIVAL)).answer == "Manhattan"
    unanswered = hops(("Which festival?", "Fyre Festival"), ("Where was #1 held?", ""))
    assert answering_hop(unanswered, Question.parse(FESTIVAL)) is None  # read for the question, not the bridge's entity
    both_checks = hops(("Who was charged with wire fraud?", "Billy McFarland"), ("When was #1 charged?", "2017"))
    assert answering_hop(both_checks, Question.parse(FESTIVAL)) is None
    side_by_side = hops(("Which festival?", "Fyre Festival"), ("Where was the festival held?", "Great Exuma"))
    assert answering_hop(side_by_side, Question.parse(FESTIVAL)) is None
    assert answering_hop(hops((FESTIVAL, "Billy McFarland")), Question.parse(FESTIVAL)).answer == "Billy McFarland"  # one hop: as read
    narrower = hops(("Which music festival was Billy McFarland charged for?", "Fyre Festival"))
    assert answering_hop(narrower, Question.parse(FESTIVAL)) is None  # a single hop narrower than the question: read for the question


def test_the_hop_before_a_side_check_answers_the_question(ask):
    checked = DECOMPOSITION + "\n3. Where was #1 announced?"  # read as a name the question gives
    events = ask(FESTIVAL, [checked], ["Fyre Festival", "Great Exuma"] + ["Billy McFarland"] * 3)
    hops = [e for e in events if isinstance(e, HopAnswered)]
    assert [h.answer for h in hops][:3] == ["Fyre Festival", "Great Exuma", "Billy McFarland"]
    assert [e for e in events if isinstance(e, AnswerReady)][-1].text == "Great Exuma"


def test_a_hop_after_the_one_answering_the_question_is_not_researched(ask):
    side_fact = DECOMPOSITION + "\n3. Who was charged with wire fraud for #1?"
    events = ask(FESTIVAL, [side_fact], ["Fyre Festival", "Great Exuma", "Billy McFarland"])
    plan = next(e for e in events if isinstance(e, PlanReady))
    assert plan.steps == DECOMPOSITION.replace("1. ", "").replace("2. ", "").split("\n")
    assert "after hop 2, which asks what the question asks" in plan.recovered
    assert [h.answer for h in events if isinstance(h, HopAnswered)] == ["Fyre Festival", "Great Exuma"]
    assert [e for e in events if isinstance(e, AnswerReady)][-1].text == "Great Exuma"


def test_a_planner_that_writes_no_sub_question_researches_the_question_as_one_hop(ask):
    """A plan of one hop is researched by the Executor's own turns for the question, as the Executor
    alone would: it searches, follows the page the results name (no model call) and answers when it
    has read enough."""
    turns = ["Billy McFarland wire fraud festival",  # the first turn searches: the query
             "Now I know", "Great Exuma"]  # after the link, a thought, then (chosen: answer) the answer read
    events = ask(FESTIVAL, ["I think it was in the Bahamas."], turns, choices=["answer"])
    plan = next(e for e in events if isinstance(e, PlanReady))
    assert plan.steps == [FESTIVAL] and "researching the question as one hop" in plan.recovered
    [hop] = [e for e in events if isinstance(e, HopAnswered)]
    assert hop.queries == ["Billy McFarland wire fraud festival", "Fyre Festival"] and hop.answer == "Great Exuma"
    assert "Great Exuma" in hop.sentence  # the retrieved sentence that states it
    assert [e for e in events if isinstance(e, AnswerReady)][-1].text == "Great Exuma"
    assert not any(isinstance(e, ReflectionDecided) for e in events)
    first_turn = next(m for m in ask.models["executor"].prompts[0] if m["role"] == "user")["content"]
    assert first_turn == question_turn(FESTIVAL, [])  # the question, as the Executor alone is asked it


def test_a_decomposition_of_another_shape_is_no_worked_example():
    memory = {"question": FESTIVAL, "correct": True, "verified": True}
    for broken in ("1. Who?", [1, 2], [{"number": "1", "template": "Who?"}], [{"number": 1}], []):
        assert worked_examples([{**memory, "decomposition": broken}]) == []
    assert worked_examples([{**memory, "decomposition": [{"number": 1, "template": "Who?", "sentence": "x"}]}]) == [
        (FESTIVAL, ["Who?"], "the answer was right")]


def test_copied_examples_and_a_restated_question_are_left_out_of_a_decomposition():
    from backend.hops import sensible

    question = "In what year did the man who shot Chris Stockley, of The Dingoes, die?"
    assert sensible(["Who shot Chris Stockley?", "In what year did #1 die?"], Question.parse(question)) == (
        ["Who shot Chris Stockley?", "In what year did #1 die?"], None)
    kept, note = sensible(["Who wrote Dracula?", "Who shot Chris Stockley?"], Question.parse(question))
    assert kept == ["Who shot Chris Stockley?"] and "left out 1" in note
    kept, note = sensible(["In what year did the man who shot Chris Stockley of The Dingoes die?", "Who is #1?"], Question.parse(question))
    assert kept == [question] and "one hop" in note
    assert sensible(["Who wrote Dracula?", "In which city was #1 born?"], Question.parse(question))[0] == []


def test_a_hop_asking_nothing_of_an_earlier_answer_goes_and_the_hops_after_it_refer_past_it():
    from backend.hops import sensible

    question = "In which city was the author of Dracula born?"
    kept, note = sensible(["Who wrote Dracula?", "Who is #1?", "In which city was #2 born?"], Question.parse(question))
    assert kept == ["Who wrote Dracula?", "In which city was #1 born?"] and "asking nothing of an earlier answer" in note
    siege = "During the Siege of Bharatpur, which Commander-in-Chief of India stormed the castle?"
    first = "Who was the Commander-in-Chief of India during the Siege of Bharatpur?"
    assert sensible([first, "What did #1 do?"], Question.parse(siege))[0] == [first]
    for asks_something in ("Where was #1 born?", "When did #1 die?", "How many castles did #1 storm?", "What did #1 storm?"):
        assert sensible([first, asks_something], Question.parse(siege))[0] == [first, asks_something]


def test_a_hop_asking_only_who_a_named_person_is_goes_and_its_name_fills_the_hops_after_it():
    from backend.hops import sensible

    # Qwen-1.5B's decompositions of `train` questions: the first hop's answer would be the name itself.
    question = "Paul DeBoy is known for an appearance in the Western action-adventure game developed by which company?"
    kept, note = sensible(["Who is Paul DeBoy?", "What company developed the Western game in which #1 appeared?"], Question.parse(question))
    assert kept == ["What company developed the Western game in which Paul DeBoy appeared?"]
    assert "who or what a name the question gives is" in note
    three = sensible(["Who is Paul DeBoy?", "Which game did #1 appear in?", "Which company developed #2?"], Question.parse(question))[0]
    assert three == ["Which game did Paul DeBoy appear in?", "Which company developed #1?"]
    vikings = "Which NCAA record does the quarterback of the Minnesota Vikings hold?"
    real = ["Who is the quarterback of the Minnesota Vikings?", "What NCAA record does #1 hold?"]
    assert sensible(real, Question.parse(vikings)) == (real, None)  # a description, not a name: a hop of its own
    assert sensible(["Who is Tom Hanks?", "What film did #1 make?"], Question.parse(question))[0] == []  # a name the question lacks


def test_a_decomposition_that_names_nothing_the_question_names_makes_the_question_one_hop():
    from backend.hops import sensible

    # Qwen-1.5B's decomposition of a `train` question: its hops share "civil war" and lose the subject.
    question = ("Alexander Kerensky was defeated and destroyed by the Bolsheviks in the course of a civil war that "
                "ended when ?")
    kept, note = sensible(["When did the civil war end?", "Who was defeated and destroyed by #1?"], Question.parse(question))
    assert kept == [question] and "no sub-question names what the question names (Alexander Kerensky, Bolsheviks)" in note
    assert sensible(["Which civil war did the Bolsheviks fight against Kerensky?", "When did #1 end?"], Question.parse(question)) == (
        ["Which civil war did the Bolsheviks fight against Kerensky?", "When did #1 end?"], None)
    assert sensible(["When did the war end?"], Question.parse("when did the war end?")) == (["When did the war end?"], None)  # no names
    # Qwen-1.5B's decomposition of a `train` question: the first hop lost who has the victory.
    gracie = ("Renzo Gracie has a victory over the UFC champion who was one of the pioneers of what sports "
              "organization?")
    kept, note = sensible(["Who is the UFC champion?", "What sports organization did #1 pioneer?"], Question.parse(gracie))
    assert kept == [gracie] and "no sub-question names Renzo Gracie, which the question names" in note
    kept_name = ["Which UFC champion did Renzo Gracie defeat?", "What sports organization did #1 pioneer?"]
    assert sensible(kept_name, Question.parse(gracie)) == (kept_name, None)


def test_what_a_question_asks_for_is_read_from_its_asking_words():
    from backend.hops import asked_kind, asks_alike, asks_for_time

    assert asked_kind("In what year was the drummer from the album \"Angel of Retribution\" born?") == ("<time>",)
    assert asked_kind("When was #1 born?") == ("<time>",)
    assert asked_kind("Who were the two actors in this film?") == ("<person>",)
    assert asked_kind("Castle Hill is a plantation near what primary residence of Thomas Jefferson?")[-1] == "resid"
    assert asked_kind("What is the name of the multiple-use sports complex where the Games were held?")[-1] == "complex"
    assert asked_kind("What is the nationality of the scientist who invented the Tribometer?") == ("nation",)
    assert asked_kind("What is #1's nationality?") == ("nation",)
    assert asked_kind("What other teams played in the same division as #1?")[-1] == "team"  # "played" ends it
    # A relative "who" inside a statement is not what it asks: its last asking word is.
    assert asked_kind("The actor who starred in Heat was born in what year?") == ("<time>",)
    assert asked_kind("How many views do the two channels have?") == ("<count>",)
    for unsaid in ("Cranium and Twin Tin Bots are both what?", "What did #1 do?", "How far south is it?", "Name it."):
        assert asked_kind(unsaid) is None
    assert asks_alike(asked_kind("Which river flows through #2?"), asked_kind("Which river flows through the city where he was born?"))
    assert asks_alike(asked_kind("What sport is played at the BayArena?"), asked_kind("Which sport has been played at the BayArena since 1958?"))
    assert not asks_alike(asked_kind("What sports organization did #1 found?"), asked_kind("Which sports complex hosted the Games?"))
    assert not asks_alike(asked_kind("What did #1 do?"), asked_kind("What did the band do?"))  # neither says
    # asking when is one of those kinds, however it is worded
    for when in ("When was #1 first played?", "In which year did it open?", "On what date did #1 open?",
                 "The actor who starred in Heat was born in what year?"):
        assert asks_for_time(when), when
    for other in ("Who was born in 1983?", "Which team did #1 play for?", "How many years did it last?"):
        assert not asks_for_time(other), other


def test_a_comparison_whose_hops_leave_out_an_option_is_one_hop():
    from backend.hops import sensible

    # Qwen-1.5B's decomposition of a `train` comparison: a bridge through neither option.
    question = ("In between Polytechnic University of the Philippines and California Polytechnic State University "
                "which was founded as a vocational high school?")
    kept, note = sensible(["Which university was founded as a vocational high school?", "What is the name of #1?"], Question.parse(question))
    assert kept == [question] and "leave out an option the question compares" in note
    both = ["When was Polytechnic University of the Philippines founded?",
            "When was California Polytechnic State University founded?"]
    assert sensible(both, Question.parse(question)) == (both, None)


def test_hops_after_the_one_asking_what_the_question_asks_are_left_out():
    from backend.hops import sensible

    # Qwen-1.5B's decompositions of `train` questions: the first hop answers, the second asks a side fact.
    question = "Harold Brent Wallis as producer and Humphrey Bogart as actor collaborated to make what 1942 film?"
    kept, note = sensible(["What 1942 film did Harold Brent Wallis and Humphrey Bogart collaborate on?",
                           "Who were the two actors in this film?"], Question.parse(question))
    assert kept == ["What 1942 film did Harold Brent Wallis and Humphrey Bogart collaborate on?"]
    assert "left out 1 sub-question(s) after hop 1, which asks what the question asks" in note
    sport = "Which sport has been played at the BayArena in Leverkusen, Germany, since 1958?"
    assert sensible(["What sport is played at the BayArena in Leverkusen?", "When was #1 first played?"], Question.parse(sport))[0] == [
        "What sport is played at the BayArena in Leverkusen?"]
    # A chain whose last hop asks what the question asks keeps every hop, even one asking alike before it.
    father = "Who is the father of the director of Heat?"
    chain = ["Who directed Heat?", "Who is #1's father?"]
    assert sensible(chain, Question.parse(father)) == (chain, None)
    dracula = "Which river flows through the city where the author of Dracula was born?"
    chain = ["Who wrote Dracula?", "In which city was #1 born?", "Which river flows through #2?"]
    assert sensible(chain, Question.parse(dracula)) == (chain, None)
    # No hop asks alike: nothing is cut.
    vikings = "Which NCAA record does the quarterback of the Minnesota Vikings hold?"
    assert sensible(["Who is the quarterback of the Minnesota Vikings?", "What does #1 hold?"], Question.parse(vikings))[0] == [
        "Who is the quarterback of the Minnesota Vikings?", "What does #1 hold?"]


