"""Where misses are lost: each miss of a hand-built evaluation folder (real run logs, a question file
with supporting facts) gets the cause its run shows."""

from __future__ import annotations

import json

from backend.eval import losses
from backend.eval.compare import compare
from backend.eval.results import EvalRow, ResultsFile
from backend.eval.spec import ROWS_FILE
from backend.events import AnswerReady, RunStarted, ToolReturned
from backend.runlog import RunLog

NAMESPACE = "eval-mia"
GOLD = {"q1": ["Alpha band", "Beta town"], "q2": ["Gamma"], "q3": ["Delta"], "q4": ["Eps"], "q5": ["Zeta"],
        "q6": ["Eta"], "q7": ["Theta"]}


def row(qid: str, answer: str, correct: bool, gold: str = "Tulsa", error: str | None = None) -> EvalRow:
    return EvalRow(index=int(qid[1:]), id=qid, question=f"Which city is question {qid} about?", gold=gold,
                   answer=answer, verdict="correct" if correct else "incorrect", judge_method="", correct=correct,
                   em=float(correct), f1=float(correct), llm_calls=1, prompt_tokens=1, completion_tokens=1,
                   tool_calls=1, wall_seconds=1, llm_seconds=1, tool_seconds=0, other_seconds=0,
                   harness_seconds=1, memories_used=0, run_id=f"run-{qid}", error=error)


def miss(number: int, qid: str, question: str, answer: str, gold: str) -> EvalRow:
    """A wrong answer's row, its run logged as run-<qid>."""
    return EvalRow(index=number, id=qid, question=question, gold=gold, answer=answer, verdict="incorrect",
                   judge_method="", correct=False, em=0.0, f1=0.0, llm_calls=1, prompt_tokens=1, completion_tokens=1,
                   tool_calls=1, wall_seconds=1, llm_seconds=1, tool_seconds=0, other_seconds=0, harness_seconds=1,
                   memories_used=0, run_id=f"run-{qid}")


def write_manifest(folder, data, label: str, method: str) -> dict:
    manifest = {"label": label, "method": method, "namespace": NAMESPACE, "data": str(data), "limit": None,
                "warm_from": None, "warm_limit": None}
    (folder / "eval.json").write_text(json.dumps(manifest), encoding="utf-8")
    return manifest


def log_run(runlog: RunLog, qid: str, passages: list[dict], answer: str, read_from: list[str]) -> None:
    run_id = f"run-{qid}"
    runlog.append(NAMESPACE, RunStarted(run_id, question="q", namespace=NAMESPACE))
    runlog.append(NAMESPACE, ToolReturned(run_id, turn=1, name="search", ok=True, content="", passages=passages))
    runlog.append(NAMESPACE, AnswerReady(run_id, text=answer, read_from=read_from))


def build_folder(tmp_path):
    folder = tmp_path / "eval"
    data = tmp_path / "dev.jsonl"
    data.write_text("".join(json.dumps({"id": q, "question": "q", "answer": "a",
                                        "supporting_facts": {"title": t, "sent_id": [0] * len(t)}}) + "\n"
                            for q, t in GOLD.items()) + json.dumps({"id": "q8", "question": "q", "answer": "a"}) + "\n",
                    encoding="utf-8")
    runlog = RunLog(folder / "runs")
    alpha = {"title": "Alpha band", "text": "Alpha is a band from Tulsa."}
    noise = {"title": "Noise", "text": "Nothing here."}
    log_run(runlog, "q1", [alpha], "Tulsa", ["Alpha band"])  # right
    log_run(runlog, "q2", [noise], "Paris", ["Noise"])  # no gold retrieved
    log_run(runlog, "q3", [{"title": "Delta", "text": "Delta lies in Tulsa."}, noise], "Paris", ["Delta", "Noise"])
    # q4's gold answer is "no": a passage saying "no" does not state it.
    log_run(runlog, "q4", [{"title": "Eps", "text": "Eps: no."}, noise], "Paris", ["Noise"])  # gold pushed out of view
    log_run(runlog, "q5", [{"title": "Zeta", "text": "Zeta."}], "Paris", [])  # an older log: nothing recorded
    log_run(runlog, "q6", [noise], "", [])  # empty answer
    log_run(runlog, "q8", [noise], "Paris", ["Noise"])  # the file names no supporting facts
    rows = [row("q1", "Tulsa", True), row("q2", "Paris", False), row("q3", "Paris", False), row("q4", "Paris", False, gold="no"),
            row("q5", "Paris", False), row("q6", "", False), row("q7", "", False, error="boom"),
            row("q8", "Paris", False)]
    results = ResultsFile(folder / ROWS_FILE)
    for r in rows:
        results.append(r)
    manifest = {"label": "mia (cold)", "method": "mia", "namespace": NAMESPACE, "data": str(data), "limit": None,
                "warm_from": None, "warm_limit": None}
    (folder / "eval.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder, manifest, rows


def test_each_miss_gets_the_cause_its_run_shows(tmp_path):
    folder, manifest, rows = build_folder(tmp_path)
    b = losses.loss_breakdown(folder, manifest, rows)
    assert b.misses == 7
    assert b.causes == {
        losses.NO_GOLD: 1, losses.NOT_READ_SHOWN: 1, losses.NOT_READ_HIDDEN: 1, losses.NOT_READ_UNRECORDED: 1,
        losses.NO_ANSWER: 1, losses.FAILED: 1, losses.GOLD_UNKNOWN: 1,
    }
    assert b.answer_in_results == 1  # q3: "Tulsa" was in a returned passage; q4's "no" is not looked for
    assert b.all_gold_retrieved == 3  # q3, q4, q5 each have one gold paragraph, returned


def test_hand_labels_turn_a_miss_into_a_judge_error_and_count_false_passes(tmp_path):
    folder, manifest, rows = build_folder(tmp_path)
    labels_file = tmp_path / "labels.jsonl"
    labels_file.write_text(json.dumps({"id": "q2", "answer": "Paris", "right": True}) + "\n"
                           + json.dumps({"id": "q1", "answer": "Tulsa", "right": False}) + "\n", encoding="utf-8")
    b = losses.loss_breakdown(folder, manifest, rows, losses.read_labels([labels_file]))
    assert b.causes[losses.JUDGE_ERROR] == 1 and b.causes[losses.NO_GOLD] == 0
    assert (b.false_passes, b.labelled_passes) == (1, 1)
    text = compare([folder, folder], tmp_path / "cmp", labels=[labels_file]).read_text(encoding="utf-8")
    assert "| mia (cold) | 7 | 1 | 1 | 1 |" in text  # misses, run failed, judge error, no usable answer
    assert "1 of 1 labelled |" in text
    # Paired with itself: no discordant question, p = 1, a zero difference.
    assert "| mia (cold) | 8 | 1 | 0 | 0 | +0.0 pts | +0.0 to +0.0 | 1.000 |" in text


def test_a_hop_plans_miss_on_a_bridge_question_names_the_hop_that_went_wrong(tmp_path):
    from backend.events import HopAnswered

    folder = tmp_path / "eval"
    question = "Where was the music festival Billy McFarland was charged for supposed to take place?"
    gold = ["Billy McFarland", "Fyre Festival"]  # the festival's page is the bridge: the question does not name it
    data = tmp_path / "dev.jsonl"
    data.write_text("".join(json.dumps({"id": q, "question": question, "answer": "Great Exuma",
                                        "supporting_facts": {"title": gold, "sent_id": [0, 0]}}) + "\n"
                            for q in ("q1", "q2", "q3", "q4")), encoding="utf-8")
    runlog = RunLog(folder / "runs")
    fyre = {"title": "Fyre Festival", "text": "It was to take place on Great Exuma."}
    billy = {"title": "Billy McFarland", "text": "Billy McFarland founded Fyre Media."}
    runs = {  # (first hop's answer, passages returned, final answer); q4 was redone: its last first hop counts
        "q1": (["Fyre Media"], [billy], "Nassau"),
        "q2": (["Fyre Festival"], [billy], "Nassau"),
        "q3": (["Fyre Festival"], [billy, fyre], "Nassau"),
        "q4": (["Lisbon", "Fyre Festival"], [billy, fyre], "Nassau"),
    }
    results = ResultsFile(folder / ROWS_FILE)
    for number, (qid, (firsts, passages, answer)) in enumerate(runs.items(), 1):
        run_id = f"run-{qid}"
        runlog.append(NAMESPACE, RunStarted(run_id, question=question, namespace=NAMESPACE))
        runlog.append(NAMESPACE, ToolReturned(run_id, turn=1, name="search", ok=True, content="", passages=passages))
        for first in firsts:
            runlog.append(NAMESPACE, HopAnswered(run_id, turn=1, number=1, template="t", question="q", answer=first))
        runlog.append(NAMESPACE, HopAnswered(run_id, turn=2, number=2, template="t", question="q", answer=answer))
        runlog.append(NAMESPACE, AnswerReady(run_id, text=answer, read_from=[p["title"] for p in passages]))
        results.append(miss(number, qid, question, answer, gold="Great Exuma"))
    manifest = write_manifest(folder, data, "mia (hops)", "mia")
    b = losses.loss_breakdown(folder, manifest, ResultsFile(folder / ROWS_FILE).read())
    assert b.hop_causes == {losses.HOP1_WRONG: 1, losses.BRIDGE_MISSED: 1, losses.LAST_HOP_MISREAD: 2}
    text = compare([folder], tmp_path / "cmp").read_text(encoding="utf-8")
    assert "| mia (hops) | 1 | 0 | 1 | 2 | 0 | 0 |" in text


def test_any_methods_miss_on_a_question_of_two_pages_names_the_hop_that_went_wrong(tmp_path):
    folder = tmp_path / "eval"
    bridge_q = "Who starred in The Hard Way and was featured on the roster of Rawkus Records?"
    compare_q = "Are Mos Def and Talib Kweli both rappers?"
    questions = {  # id: (question, supporting pages)
        "q1": (bridge_q, ["The Hard Way (1991 film)", "Mos Def"]),
        "q2": (bridge_q, ["The Hard Way (1991 film)", "Mos Def"]),
        "q3": (bridge_q, ["The Hard Way (1991 film)", "Mos Def"]),
        "q4": (compare_q, ["Mos Def", "Talib Kweli"]),
        "q5": (compare_q, ["Mos Def", "Talib Kweli"]),
        "q6": ("Which rapper was born in Brooklyn?", ["Mos Def", "Talib Kweli"]),  # neither page named
    }
    data = tmp_path / "dev.jsonl"
    data.write_text("".join(json.dumps({"id": q, "question": question, "answer": "x",
                                        "supporting_facts": {"title": titles, "sent_id": [0, 0]}}) + "\n"
                            for q, (question, titles) in questions.items()), encoding="utf-8")
    film = {"title": "The Hard Way (1991 film)", "text": "It stars Michael J. Fox and James Woods, with Mos Def."}
    mos = {"title": "Mos Def", "text": "Mos Def is a rapper signed to Rawkus Records."}
    talib = {"title": "Talib Kweli", "text": "Talib Kweli is a rapper."}
    runs = {  # passages returned, final answer
        "q1": ([film], "Michael J. Fox"),  # the bridge page never came back
        "q2": ([film, mos], "James Woods"),  # it did, and was read wrong
        "q3": ([film, mos], "Mos Def (Dante Smith)"),  # a miss by the Judge, but the answer is the bridge
        "q4": ([mos], "no"),
        "q5": ([mos, talib], "no"),
        "q6": ([mos, talib], "Talib Kweli"),
    }
    runlog = RunLog(folder / "runs")
    results = ResultsFile(folder / ROWS_FILE)
    for number, (qid, (passages, answer)) in enumerate(runs.items(), 1):
        run_id = f"run-{qid}"
        runlog.append(NAMESPACE, RunStarted(run_id, question=questions[qid][0], namespace=NAMESPACE))
        runlog.append(NAMESPACE, ToolReturned(run_id, turn=1, name="search", ok=True, content="", passages=passages))
        runlog.append(NAMESPACE, AnswerReady(run_id, text=answer, read_from=[p["title"] for p in passages]))
        results.append(miss(number, qid, questions[qid][0], answer, gold="x"))
    manifest = write_manifest(folder, data, "none (links)", "none")
    b = losses.loss_breakdown(folder, manifest, ResultsFile(folder / ROWS_FILE).read())
    assert b.hop_causes == {losses.BRIDGE_MISSED: 1, losses.LAST_HOP_MISREAD: 1, losses.STOPPED_AT_BRIDGE: 1,
                            losses.OPTION_MISSED: 1, losses.OPTIONS_MISREAD: 1}
    assert b.all_gold_retrieved == 4  # q2, q3, q5, q6
