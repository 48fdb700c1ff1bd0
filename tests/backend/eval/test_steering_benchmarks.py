"""benchmarks/followup_pairs.py and benchmarks/edited_plans.py: the pairs and edits their rules build from
`train`'s supporting facts, the follow-up pairs written by hand, and one run of each on the tiny random
model (the real model's runs are the benchmarks' own, not a test's)."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks.edited_plans import bridge_title, person_edit, questions, run_questions
from benchmarks.edited_plans import table as edited_table
from benchmarks.followup_pairs import HAND_PAIRS, REPO, TRAIN_FILES, build_pairs, run_pairs, table
from benchmarks.followup_pairs_hand import HandPairError, hand_pairs
from backend.follow_up import Thread, ThreadTurn, rewrite
from backend.replay import replay


TRAIN = REPO / "data" / "hotpotqa" / "train.jsonl"


def _train() -> list[dict]:
    return [json.loads(line) for line in TRAIN.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_rule_builds_follow_ups_that_name_the_first_answer_only_by_a_pronoun():
    pairs = build_pairs(limit=1000, hand=None)
    assert len(pairs) >= 30 and {pair.rule for pair in pairs} == {"relative", "object", "subject"}
    by_id = {pair.id: pair for pair in pairs}
    assert len(by_id) == len(pairs)
    singer = next(pair for pair in pairs if "Four Seasons of Love" in pair.question)
    assert (singer.first_question, singer.follow_up) == ('Who is the singer who sang "Four Seasons of Love"?',
                                                        "How many records did she sell worldwide?")
    game = next(pair for pair in pairs if "Paul DeBoy" in pair.question)
    assert game.follow_up == "It was developed by which company?", "a game is 'it', whatever pronouns its page uses"
    # where the answer is the bridge page itself ("Eric Edward Whitacre": "Eric Whitacre") no pair is built
    assert not any("Conspirare" in pair.question for pair in pairs)
    town = next(pair for pair in pairs if "Canobie Lake" in pair.question)
    assert (town.first_question, town.first_answer, town.follow_up, town.rule) == (
        "What is the town that gets it's water supply from Canobie Lake?", "Salem, New Hampshire",
        "What is its population?", "object")
    for pair in pairs:
        assert pair.first_answer.lower() not in pair.question.lower()
        # read with a thread whose first answer is right, the follow-up names it again
        made = rewrite(pair.follow_up, Thread("t", [ThreadTurn("t", pair.first_question, pair.first_question,
                                                               pair.first_answer)]))
        assert pair.first_answer in made.question, (pair.follow_up, made.question)


def test_a_pair_is_asked_as_a_thread_and_at_once_and_a_stopped_run_goes_on(build_agent, tmp_path, tiny_model_dir):
    agent = build_agent(tmp_path / "agent", tiny_model_dir, max_turns=1, reflections=0)
    pairs = build_pairs(limit=2)
    rows = run_pairs(agent, pairs[:1], tmp_path / "rows.jsonl", progress=False)
    (row,) = rows
    assert row["id"] == pairs[0].id and row["thread_searches"] >= row["follow_up_searches"] >= 0
    assert {"thread_right", "full_right", "thread_seconds", "full_seconds", "rewritten"} <= set(row)
    thread_runs = agent.runlog.list_runs("thread-1")
    assert len(thread_runs) == 2 and thread_runs[0].thread == thread_runs[1].run_id  # asked as a thread
    assert len(agent.runlog.list_runs("full-1")) == 1
    assert run_pairs(agent, pairs[:1], tmp_path / "rows.jsonl", progress=False) == rows  # resumed: nothing again
    assert len(agent.runlog.list_runs("thread-1")) == 2
    printed = table(rows)
    assert "| as a thread: first hop, then the follow-up |" in printed and "exact McNemar p = " in printed


def test_at_least_100_pairs_come_from_train_alone_by_rule_and_by_hand():
    assert TRAIN_FILES == (TRAIN,), "train-extra is for training only, never an evaluation"
    train = {record["id"]: record for record in _train()}
    pairs = build_pairs(limit=1000)
    assert len(pairs) >= 100 and len({pair.id for pair in pairs}) == len(pairs)
    assert all(pair.id in train and pair.question == " ".join(train[pair.id]["question"].split())
               and pair.answer == train[pair.id]["answer"] for pair in pairs)
    rule = {pair.id for pair in build_pairs(limit=1000, hand=None)}
    hand = hand_pairs(HAND_PAIRS, list(train.values()))  # every row written by hand validates
    assert {pair.id for pair in pairs} == rule | {pair.id for pair in hand}
    assert not rule & {pair.id for pair in hand}, "a question the rule builds needs no pair by hand"
    brock = next(pair for pair in hand if pair.first_answer == "David Brock")
    assert (brock.first_question, brock.follow_up, brock.rule) == (
        "Who founded Media Matters for America?", "What 1996 book did he write?", "hand")
    assert next(pair for pair in hand if "Manny Cussins" in pair.question).first_answer == "Waring & Gillow"
    assert [pair.id for pair in build_pairs(limit=100)] == [pair.id for pair in pairs[:100]]  # train's order


def test_the_table_says_how_many_pairs_the_rule_built_and_how_many_were_written_by_hand():
    row = {"thread_right": True, "full_right": False, "thread_seconds": 2.0, "full_seconds": 1.0,
           "thread_searches": 2, "full_searches": 1, "follow_up_searches": 0, "first_right": True,
           "rewrite_named_the_bridge": True, "model_chose": False}
    printed = table([{**row, "rule": "object"}, {**row, "rule": "hand"}, {**row, "rule": "hand"}])
    assert printed.startswith("3 thread pairs (HotpotQA train bridge questions: 1 built by rule, 2 written by hand)")


def _row(**changes) -> dict:
    row = json.loads(HAND_PAIRS.read_text(encoding="utf-8").splitlines()[0])
    return {**row, **changes}


def test_where_the_rule_and_a_hand_both_give_a_pair_the_rule_s_is_kept(tmp_path):
    ruled = build_pairs(limit=1, hand=None)[0]
    record = next(record for record in _train() if record["id"] == ruled.id)
    bridge = next(title for title in record["supporting_facts"]["title"] if ruled.first_answer in title)
    written = tmp_path / "hand.jsonl"
    written.write_text(json.dumps({"id": ruled.id, "question": record["question"], "first_question": "Who?",
                                  "bridge": bridge, "follow_up": "And what about it?", "answer": record["answer"]})
                       + "\n", encoding="utf-8")
    (pair,) = [pair for pair in build_pairs(limit=1000, hand=written) if pair.id == ruled.id]
    assert pair == ruled


@pytest.mark.parametrize("lines, refused", [
    ([_row(question="Where was the Russian Civil War fought?")], "1: question is not train's"),
    ([_row(answer="1922")], "1: answer is not train's"),
    ([_row(bridge="Alexander Kerensky")], "1: bridge 'Alexander Kerensky' is not a supporting title"),
    ([_row(follow_up="When did the Russian Civil War end?")], "1: follow_up names the bridge"),
    ([_row(first_question="When did the Russian Civil War start?")], "1: first_question names the bridge"),
    ([_row(follow_up="When did the war end?")], "1: the follow-up has no pronoun"),
    ([_row(id="5a8ce55f554299441c6b9f62")], "1: 5a8ce55f554299441c6b9f62 is not a bridge question of the train"),
    ([{key: value for key, value in _row().items() if key != "bridge"}], "1: missing ['bridge']"),
    ([_row(), _row()], "2: 5abf63f15542997ec76fd3ea is written twice"),
    (['{"id": "5abf63f15542997ec76fd3ea",'], "1: not JSON"),
])
def test_a_malformed_hand_row_is_refused_with_its_line_and_what_to_change(tmp_path, lines, refused):
    written = tmp_path / "hand.jsonl"
    written.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
                       encoding="utf-8")
    with pytest.raises(HandPairError, match=f"^{re.escape(f'{written}:{refused}')}"):
        build_pairs(hand=written)


def test_an_edit_names_the_bridge_page_and_the_edited_plan_is_researched_as_written(build_agent, tmp_path,
                                                                                    tiny_model_dir):
    record = {"type": "bridge", "question": "Where was the festival Billy McFarland promoted held?",
              "answer": "Great Exuma", "supporting_facts": {"title": ["Billy McFarland (entrepreneur)", "Fyre Festival"]}}
    assert bridge_title(record) == "Fyre Festival"
    assert person_edit(record["question"], "Fyre Festival", [record["question"]], "") == (
        ["What is Fyre Festival?", record["question"]], "missing hop")
    assert person_edit(record["question"], "Fyre Festival", ["Which festival did he promote?", "Where was #1 held?"],
                       "Coachella") == (["What is Fyre Festival?", "Where was Fyre Festival held?"], "first hop")
    assert person_edit(record["question"], "Fyre Festival", ["Which festival?", "Where was #1 held?"], "Fyre Festival") is None

    agent = build_agent(tmp_path / "agent", tiny_model_dir, max_turns=1, reflections=0)
    (row,) = run_questions(agent, questions(limit=1), tmp_path / "rows.jsonl", progress=False)
    # The tiny random model writes no readable sub-question: its plan is the question, one hop, and the
    # person adds the missing one; the edited plan runs as written.
    assert row["planner_plan"] == [questions(limit=1)[0][0]["question"]] and row["edit"] == "missing hop"
    (run,) = agent.runlog.list_runs("person-1")
    logged = replay(agent.runlog.load("person-1", run.run_id))
    assert logged.plans[0].source == "person" and logged.plans[0].steps == row["edited_plan"]
    assert "train bridge questions" in edited_table([row])
