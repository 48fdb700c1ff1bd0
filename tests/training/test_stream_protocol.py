"""The paper's test-time protocol on a stream: k rollouts per question, one answer reported without the
ground truth, memories, an update every batch, rows that record it all, and the paired table. On the
tiny random model, the real wiki index and a real SQLite memory store."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from backend.eval.datasets import EvalQuestion
from backend.config import SELECTIONS
from training.ttrl.selection import Rollouts, by_majority, by_memory, by_reader, select_reported
from training.ttrl.stream import stream_questions
from backend.eval.results import ResultsFile
from training.ttrl.stream_table import plotted, read_stream, read_variants, write_table

from tests.backend.eval.test_results_and_summary import make_row
from tests.training.conftest import QUESTIONS
from tests.training.test_ttrl import make_learner, settings, store, tiny_model  # noqa: F401  (fixtures)


def test_majority_picks_the_most_given_answer_and_ignores_empty_ones():
    assert by_majority(["Paris", "lyon", "paris.", ""]) == 0
    assert by_majority(["", "Lyon", "Paris"]) == 1  # a tie: the earliest answered rollout
    assert by_majority(["", ""]) == 0


def test_memory_picks_the_plan_nearest_a_past_success(embedder):
    answers = ["Lyon", "Paris", "Paris"]
    plans = ["1. Search for the Louvre's city.", "1. Search for the tower.", "1. Guess."]
    past = ["1. Search for the city of the Louvre museum."]
    assert by_memory(answers, plans, past, embedder.encode) == 0  # against the majority's Paris
    assert by_memory(answers, plans, [], embedder.encode) == 1  # no past success: the majority
    seen = Rollouts(question="Which city is the Louvre in?", answers=answers, plans=plans)
    assert select_reported(seen, how="majority", past_plans=past, embed=embedder.encode) == 1
    assert select_reported(seen, how="memory", past_plans=past, embed=embedder.encode) == 0


def test_the_reader_chooses_only_among_differing_answers_and_reports_the_first_rollout_giving_its_choice(tiny_model):
    from tests.counting_model import Counting

    reader = Counting(tiny_model)
    louvre = [{"title": "Louvre", "source": "wiki:hotpotqa", "text": "The Louvre is a museum in Paris."}]
    agreeing = Rollouts(question="Which city is the Louvre in?", answers=["Paris", "paris.", ""], plans=["a", "b", "c"],
                        passages=[louvre, louvre, []])
    assert by_reader(agreeing, reader) == 0 and reader.calls == 0  # one distinct answer: no model call
    differing = Rollouts(question="Which city is the Louvre in?", answers=["", "Lyon", "Paris", "Lyon", "Paris"],
                         plans=["a"] * 5, passages=[louvre] * 5)
    chosen = by_reader(differing, reader)
    assert reader.calls == 1 and chosen in (1, 2)  # the first rollout giving the chosen answer, never a repeat
    assert select_reported(differing, how="reader", reader=reader) == chosen
    assert select_reported(differing, how="reader") == 1  # no reader given: the majority (a tie: the earliest)


def _questions():
    return [EvalQuestion(id=f"q{i}", question=q, answer=a) for i, (q, a) in enumerate(QUESTIONS)]


def test_a_stream_reports_an_answer_per_question_and_resumes_without_asking_twice(make_learner, tmp_path):
    learner = make_learner(learner="none", rollouts_per_signal=2, signals_per_update=2)
    assert stream_questions(learner, _questions()[:2], namespace="alice", progress=False) == 2
    rows = learner.read_log("signals.jsonl")
    assert [r["source"] for r in rows] == ["stream:q0", "stream:q1"]
    for row in rows:
        assert len(row["answers"]) == 2 and len(row["rewards"]) == 2 and row["planner_version"] == "v0000"
        assert len(row["rollout_stats"]) == 2 and all(s["llm_calls"] >= 2 and s["wall_seconds"] > 0
                                                      for s in row["rollout_stats"])
        assert row["reported"] in row["answers"] and isinstance(row["reported_correct"], bool)
        assert row["selection"] == "memory" and row["learner"] == "none"
        # A stream's question records what every way of selecting would report, on the same rollouts.
        assert set(row["selected"]) == set(SELECTIONS) and row["selected"]["memory"]["answer"] == row["reported"]
        assert all(pick["answer"] in row["answers"] and isinstance(pick["correct"], bool)
                   for pick in row["selected"].values())
    assert learner.batch == [] and [v.number for v in learner.versions.all()] == [0]  # no learning: no update

    # A stopped stream started again asks only the questions it has not reported yet.
    assert stream_questions(learner, _questions(), namespace="alice", progress=False) == 1
    assert [r["source"] for r in learner.read_log("signals.jsonl")] == ["stream:q0", "stream:q1", "stream:q2"]


def test_the_table_pairs_variants_by_question(tmp_path):
    def stream_folder(name, correct):
        folder = tmp_path / name / "ttrl"
        folder.mkdir(parents=True)
        rows = [{"source": f"stream:q{i}", "reported_correct": c, "seconds": 10.0, "at": 1000.0 + 100 * i}
                for i, c in enumerate(correct)]
        (folder / "signals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return tmp_path / name

    reference = stream_folder("k4-none", [True, False, False, True])
    learned = stream_folder("k4-grpo", [True, True, True, True])
    version = learned / "ttrl" / "versions" / "v0001"
    version.mkdir(parents=True)
    (version / "meta.json").write_text(json.dumps({"number": 1, "status": "promoted", "update_seconds": 100.0,
                                                   "canary_seconds": 20.0, "train_reward": 0.4, "created": 1350.0}))
    assert read_stream(learned, "k4-grpo")[0].seconds_per_update == 120.0
    (learned / "peak_rss_kb.txt").write_text("6120000\n7450000\n")  # two runs of the stream
    text = write_table([reference, learned], "k4-none", tmp_path / "table").read_text()
    assert "| k4-grpo | 4 | 100.0% | +50.0 pts (4 paired) |" in text and "| 1 (1) | 120 | 7.45 |" in text
    assert "| 0.500 | 14 | 10 |" in text  # McNemar on 2 against 0; 14 questions would show such a gain reliably
    assert "| 10 | 0 (0) | - | - |" in text  # the reference: no update, no peak recorded
    assert "McNemar" in text and "k4-grpo: 0.40" in text
    assert np.isclose(read_stream(reference, "k4-none")[0].seconds_per_signal, 10.0)

    evaluation = tmp_path / "none"  # an evaluation that ran on past the stream: its first 4 questions pair
    evaluation.mkdir()
    results = ResultsFile(evaluation / "rows.jsonl")
    for index, correct in [(5, True), (0, True), (1, False), (2, False), (3, False), (4, True)]:
        results.append(make_row(index, correct=correct, wall=20.0 if index < 4 else 90.0, llm=1.0, tool=1.0, id=f"q{index}"))
    text = write_table([reference, evaluation], "k4-none", tmp_path / "cut", limit=4).read_text()
    assert "| none | 4 | 25.0% | -25.0 pts (4 paired) |" in text and "| none | 20 | 0 (0) |" in text  # behind: no size

    # A round's table while the next round runs: the streams too are cut, with the updates of their first N.
    text = write_table([reference, learned], "k4-none", tmp_path / "round", limit=3).read_text()
    assert "| k4-none | 3 | 33.3% |" in text and "| k4-grpo | 3 | 100.0% | +66.7 pts (3 paired) |" in text
    assert "| 0 (0) | - | 7.45 |" in text and "k4-grpo: 0.40" not in text  # its update came after the 4th question
    # Its checksum is of the 3 questions' lines, so the round's table still checks out after the stream goes on.
    first_three = b"".join((reference / "ttrl" / "signals.jsonl").read_bytes().splitlines(keepends=True)[:3])
    assert f"| k4-none | 3 | 33.3% | - | - | - | - | 10 | 0 (0) | - | - | `{hashlib.sha256(first_three).hexdigest()[:16]}` |" in text
    with (reference / "ttrl" / "signals.jsonl").open("a") as later:
        later.write(json.dumps({"source": "stream:q4", "reported_correct": True, "seconds": 10.0, "at": 1400.0}) + "\n")
    assert write_table([reference, learned], "k4-none", tmp_path / "later", limit=3).read_text() == text


def test_a_variant_streaming_the_same_questions_reads_the_executor_turns_another_made(make_learner, tiny_model,
                                                                                      tmp_path):
    from tests.counting_model import Counting

    shared = str(tmp_path / "executor-calls.jsonl")
    first_executor, second_executor = Counting(tiny_model), Counting(tiny_model)
    first = make_learner(learner="none", rollouts_per_signal=2, shared_executor_calls=shared,
                         executor_model=first_executor, root=tmp_path / "k2-none")
    stream_questions(first, _questions()[:1], namespace="alice", progress=False)
    second = make_learner(learner="none", rollouts_per_signal=2, shared_executor_calls=shared,
                          executor_model=second_executor, root=tmp_path / "k2-other")
    stream_questions(second, _questions()[:1], namespace="alice", progress=False)
    # The same Planner version samples the same plans under the same seeds: every Executor turn is read.
    assert first_executor.calls > 0 and second_executor.calls == 0
    rows = [learner.read_log("signals.jsonl")[0] for learner in (first, second)]
    assert rows[0]["answers"] == rows[1]["answers"] and rows[0]["rewards"] == rows[1]["rewards"]


def test_the_table_pairs_each_way_of_selecting_on_the_same_rollouts_and_bounds_them(tmp_path):
    folder = tmp_path / "k4-none" / "ttrl"
    folder.mkdir(parents=True)
    rows = []
    for i, (memory, reader, right_rollouts) in enumerate([(True, True, 2), (False, True, 1), (False, False, 1),
                                                          (False, False, 0)]):
        rows.append({"source": f"stream:q{i}", "selection": "memory", "reported_correct": memory, "correct": right_rollouts,
                     "seconds": 5.0, "selected": {"memory": {"answer": "a", "correct": memory},
                                                  "majority": {"answer": "a", "correct": memory},
                                                  "reader": {"answer": "b", "correct": reader}}})
    (folder / "signals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = write_table([tmp_path / "k4-none"], "k4-none", tmp_path / "table").read_text()
    assert "| k4-none | 4 | 25.0% | - |" in text
    assert "| k4-none, reported by reader | 4 | 50.0% | +25.0 pts (4 paired) |" in text
    assert "| k4-none, reported by majority | 4 | 25.0% | +0.0 pts (4 paired) |" in text
    assert "| k4-none, reported by memory |" not in text  # the row's own selection is the variant's row
    assert "| k4-none, any rollout right (ground truth; a bound) | 4 | 75.0% | +50.0 pts (4 paired) |" in text
    digest = read_stream(tmp_path / "k4-none", "k4-none")[0].digest
    assert text.count(f"`{digest}`") == 4  # each row computed from the one rows file, named by its checksum
    # The plot draws the method and its bound; the other selections are in the table only.
    drawn = plotted(read_variants(tmp_path / "k4-none"), "k4-none")
    assert [v.label for v in drawn] == ["k4-none", "k4-none, any rollout right (ground truth; a bound)"]

