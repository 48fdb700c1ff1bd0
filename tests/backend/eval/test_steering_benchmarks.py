"""benchmarks/followup_pairs.py and benchmarks/edited_plans.py: the pairs and edits their rules build from
`train`'s supporting facts, and one run of each on the tiny random model (the real model's runs are
the benchmarks' own, not a test's)."""

from __future__ import annotations

from benchmarks.edited_plans import bridge_title, person_edit, questions, run_questions
from benchmarks.edited_plans import table as edited_table
from benchmarks.followup_pairs import build_pairs, run_pairs, table
from backend.follow_up import Thread, ThreadTurn, rewrite
from backend.replay import replay


def test_the_rule_builds_follow_ups_that_name_the_first_answer_only_by_a_pronoun():
    pairs = build_pairs(limit=100)
    assert len(pairs) >= 44 and {pair.rule for pair in pairs} == {"relative", "object", "subject"}
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
