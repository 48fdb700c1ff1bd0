"""The app's run and training's rollout are one episode loop: same prompts, same events."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest

from backend.agent import ResearchAgent, RunRequest
from backend.episode import EpisodeSettings
from backend.events import AnswerReady, MemoriesRetrieved, MemoryStored, TextDelta, VerdictReady
from backend.prompts.manager import format_memories
from backend.runlog import RunLog
from memory_db import MemoryStore
from tests.backend.scripted_model import answer_turn
from tests.training.hops_example import DECOMPOSITION, FESTIVAL
from training.episode import Grader, run_episode

QUESTION = 'The band who released the debut album "Tinted Windows" had their first performance in what city?'


def call(query: str) -> str:
    return f'<think>next step</think><tool_call>{json.dumps({"name": "search", "arguments": {"query_list": [query]}})}</tool_call>'


def answer(text: str) -> str:
    return f"<think>enough evidence</think><answer>{text}</answer>"


SCRIPT = {  # a wrong first answer, a replan, a right final answer
    "planner": (["1. Search for the album Tinted Windows\n2. Search for the band's first performance",
                 "1. Search for the band's first concert city"], ["no"]),
    "executor": ([call("Tinted Windows album"), answer("Chicago"), call("Tinted Windows first performance"),
                  answer("Tulsa")], []),
}


def comparable(events) -> list[dict]:
    """The events both runs share, without ids, times and meters; the verdict by its label."""
    kept = []
    for event in events:
        if isinstance(event, (TextDelta, MemoriesRetrieved, MemoryStored)):
            continue
        row = {"type": type(event).__name__, **asdict(event)}
        for key in ("run_id", "at", "stats", "seconds"):
            row.pop(key, None)
        if isinstance(event, VerdictReady):
            row = {"type": row["type"], "label": row["label"], "ground_truth": row["ground_truth"]}
        kept.append(row)
    return kept


def served_config(tmp_path, plan_shape="steps"):
    """The repository's config with memory and runs in tmp: 4 free-form turns, the Planner plans (numbered
    steps, as SCRIPT's plans are, unless told)."""
    from backend.config import RoleConfig, load_config

    base = load_config(environ={})
    return replace(base, data_dir=tmp_path, memory_url=f"sqlite:///{tmp_path / 'memory.sqlite'}",
                   agent=replace(base.agent, max_turns=4, reflections=1, sparse_memory_planner="planner", guided_actions="off",
                                 plan_shape=plan_shape),
                   roles={name: RoleConfig() for name in base.roles})


@pytest.fixture
def scripted(scripted_model_class):
    def build():
        models = {role: scripted_model_class(role, *SCRIPT.get(role, ([], []))) for role in ("planner", "executor", "judge", "manager")}
        for model in models.values():  # a served model's traits: free-form turns
            model.traits = replace(model.traits, small=False, guided_turns=False)
        return models
    return build


def app_run_and_rollout(config, scripted, question, gold, tools, embedder, memory_text):
    """The question asked in the app (method mia) and rolled out by the trainer, each with its own
    freshly scripted models; asserts they made the same events and prompts. Returns both runs."""
    app_models = scripted()
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    try:
        agent = ResearchAgent(config, models=app_models, tools=tools, store=store, runlog=RunLog(config.runs_dir))
        app_events = list(agent.run(RunRequest(question=question, ground_truth=gold, method="mia")))
    finally:
        store.close()
    train_models = scripted()
    episode = run_episode(
        question=question, ground_truth=gold, planner_model=train_models["planner"],
        executor_model=train_models["executor"], tools=tools, grader=Grader(),
        settings=EpisodeSettings.from_config(config, train_models["executor"].traits), memory_text=memory_text,
    )
    assert comparable(episode.events) == comparable(app_events)
    for role in ("planner", "executor"):
        assert train_models[role].prompts == app_models[role].prompts
    return app_events, episode


def test_the_trainers_rollout_yields_the_apps_events_and_prompts(tmp_path, shared_tools, embedder, scripted):
    app_events, episode = app_run_and_rollout(served_config(tmp_path), scripted, QUESTION, "Tulsa", shared_tools,
                                              embedder, format_memories([], []))
    assert [type(e).__name__ for e in app_events].count("PlanReady") == 2  # the flow replanned
    assert (episode.first_answer, episode.answer, episode.replanned) == ("Chicago", "Tulsa", True)
    assert not episode.correct_first and episode.correct_final


HOPS_SCRIPT = {  # a decomposition of two hops, each hop's answer read as a span
    "planner": ([DECOMPOSITION], []),
    "executor": (["Fyre Festival", "Great Exuma"], []),
}


def test_the_trainers_rollout_of_sub_questions_yields_the_apps_events_and_prompts(tmp_path, shared_tools, embedder,
                                                                                  scripted_model_class):
    def scripted():
        return {role: scripted_model_class(role, *HOPS_SCRIPT.get(role, ([], [])))
                for role in ("planner", "executor", "judge", "manager")}

    app_events, episode = app_run_and_rollout(served_config(tmp_path, plan_shape="subquestions"), scripted, FESTIVAL,
                                              "Great Exuma", shared_tools, embedder, "")
    assert [type(e).__name__ for e in app_events].count("HopAnswered") == 2
    assert episode.answer == "Great Exuma" and episode.correct_final


def test_a_logged_run_replays_into_the_steps_the_session_recorded(tmp_path, shared_tools, embedder, scripted):
    from backend.replay import replay

    config = served_config(tmp_path)
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    try:
        agent = ResearchAgent(config, models=scripted(), tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
        live = list(agent.run(RunRequest(question=QUESTION, ground_truth="Tulsa", method="mia")))
    finally:
        store.close()
    logged = agent.runlog.load("default", live[0].run_id)
    train_models = scripted()
    episode = run_episode(
        question=QUESTION, ground_truth="Tulsa", planner_model=train_models["planner"], executor_model=train_models["executor"],
        tools=shared_tools, grader=Grader(), settings=EpisodeSettings.from_config(config, train_models["executor"].traits),
        memory_text=format_memories([], []),
    )
    for events in (live, logged):
        run = replay(events)
        assert run.steps == episode.steps  # the one step record, rebuilt from the log
        assert [s.tool for s in run.steps] == ["search", None, "search", None]
        assert (run.first_answer, run.answer, run.replanned) == ("Chicago", "Tulsa", True)
        assert run.verdict.label == "correct" and run.memory_stored is not None and not run.failed
    summary = agent.runlog.list_runs("default")[0]
    assert (summary.question, summary.answer, summary.verdict) == (QUESTION, "Tulsa", "correct")


def test_stop_ends_the_run_with_the_answer_so_far_unjudged_and_unstored(tmp_path, shared_tools, embedder, scripted):
    import threading

    from backend.events import AnswerReady, RunFinished

    config = served_config(tmp_path)
    models = scripted()
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    stop = threading.Event()
    events = []
    try:
        agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
        for event in agent.run(RunRequest(question=QUESTION, ground_truth="Tulsa", method="mia"), stop_requested=stop.is_set):
            events.append(event)
            if isinstance(event, AnswerReady):
                stop.set()  # the person presses Stop once the first answer shows
        assert store.count(namespace="default") == 0
    finally:
        store.close()
    kinds = [type(e).__name__ for e in events]
    assert "ReflectionDecided" not in kinds and "VerdictReady" not in kinds and "MemoryStored" not in kinds
    stopped = [e for e in events if isinstance(e, AnswerReady)][-1]
    assert (stopped.text, stopped.forced, stopped.reason) == ("Chicago", True, "stopped by the user")
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.stopped and finished.answer == "Chicago"
    assert models["planner"].choices  # the reflection's choice was never asked for
    logged = agent.runlog.load("default", events[0].run_id)
    assert logged[-1].stopped


def notice_image(path, lines):
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (1100, 130 * len(lines)), "white")
    for row, line in enumerate(lines):
        ImageDraw.Draw(image).text((20, 30 + 110 * row), line, fill="black", font=ImageFont.load_default(size=48))
    image.save(path)
    return str(path)


@pytest.mark.skipif(__import__("shutil").which("tesseract") is None, reason="needs Debian's tesseract-ocr (CI installs it)")
def test_text_in_the_question_image_joins_the_caption_the_planner_sees(tmp_path, shared_tools, embedder, scripted):
    from PIL import Image, ImageDraw, ImageFont

    from backend.events import RunStarted

    image = Image.new("RGB", (900, 200), "white")
    ImageDraw.Draw(image).text((20, 60), "TINTED WINDOWS DEBUT ALBUM", fill="black", font=ImageFont.load_default(size=48))
    path = tmp_path / "poster.png"
    image.save(path)
    config = served_config(tmp_path)
    models = scripted()
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    try:
        agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
        events = list(agent.run(RunRequest(question=QUESTION, image=str(path), ground_truth="Tulsa", method="mia")))
    finally:
        store.close()
    started = next(e for e in events if isinstance(e, RunStarted))
    assert "by OCR: TINTED WINDOWS DEBUT ALBUM" in started.caption and started.caption_source.endswith("ocr")
    assert "TINTED WINDOWS DEBUT ALBUM" in models["planner"].prompts[0][1]["content"]  # the Planner reads it


@pytest.mark.skipif(__import__("shutil").which("tesseract") is None, reason="needs Debian's tesseract-ocr (CI installs it)")
def test_text_in_the_question_image_is_evidence_an_answer_cites(tmp_path, shared_tools, embedder, scripted_model_class):
    path = notice_image(tmp_path / "notice.png", ["HARBOUR OF VELLMARK", "TARIFF 2025: 17 CROWNS PER TONNE"])
    models = {role: scripted_model_class(role) for role in ("planner", "judge", "manager")}
    models["planner"].outputs.extend(["1. Read the tariff on the notice", "1. Read it again"])
    models["executor"] = scripted_model_class("executor", [answer_turn("17 crowns per tonne")])
    for model in models.values():
        model.traits = replace(model.traits, small=False, guided_turns=False)
    config = served_config(tmp_path)
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    try:
        agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
        events = list(agent.run(RunRequest(question="What tariff per tonne does the notice in this image state?",
                                           image=str(path), ground_truth="17 crowns", method="none")))
    finally:
        store.close()
    answer = [e for e in events if isinstance(e, AnswerReady)][-1]
    assert answer.text == "17 crowns per tonne"
    assert [s["title"] for s in answer.sources] == ["Text in the question's image (OCR)"]
    # The Executor's first turn shows the image's text whole, as data, and not again in the caption.
    first_turn = models["executor"].prompts[0][1]["content"]
    assert "<tool_response>\nText in the question's image (OCR):\n" in first_turn and "by OCR:" not in first_turn
    assert "17 CROWNS PER TONNE" in first_turn.upper()
    assert "17 CROWNS PER TONNE" in answer.sources[0]["sentence"].upper()
    from app.report import source_label

    assert source_label(answer.sources[0]) == "your image, read by OCR"


@pytest.mark.skipif(__import__("shutil").which("tesseract") is None, reason="needs Debian's tesseract-ocr (CI installs it)")
def test_with_image_text_first_an_answer_the_image_states_is_given_before_any_plan(tmp_path, shared_tools, embedder,
                                                                                   scripted_model_class):
    from backend.events import PlanReady, Recovery, ReflectionDecided, VerdictReady

    image = notice_image(tmp_path / "notice.png", ["HARBOUR OF VELLMARK", "TARIFF 2025: 17 CROWNS PER TONNE"])
    question = "What tariff per tonne does the notice in this image state?"
    config = served_config(tmp_path)
    config = replace(config, agent=replace(config.agent, image_text_first=True))

    def ask(reader_says, image=image, question=question, ground_truth="17"):
        models = {role: scripted_model_class(role) for role in ("planner", "judge", "manager")}
        models["planner"].outputs.extend(["1. Search for the Vellmark harbour tariff"])
        models["executor"] = scripted_model_class("executor", [reader_says, answer_turn("17 crowns")])
        store = MemoryStore(config.resolved_memory_url, embedder=embedder)
        try:
            agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
            request = RunRequest(question=question, image=image, ground_truth=ground_truth, method="mia")
            return models, list(agent.run(request))
        finally:
            store.close()

    models, events = ask("17")
    answer = [e for e in events if isinstance(e, AnswerReady)][-1]
    assert answer.text == "17" and [s["title"] for s in answer.sources] == ["Text in the question's image (OCR)"]
    assert not any(isinstance(e, (PlanReady, ReflectionDecided)) for e in events) and not models["planner"].prompts
    assert any(isinstance(e, Recovery) and e.action == "answered from it, without a plan or a search" for e in events)
    assert len(models["executor"].prompts) == 1  # one read of the image's text

    # Without ground truth the verdict says what can and cannot be checked, without the Judge's calls.
    models, events = ask("17", ground_truth=None)
    verdict = next(e for e in events if isinstance(e, VerdictReady))
    assert verdict.label == "unsure" and verdict.method == "stated by the question's image" and not models["judge"].prompts
    assert "only the person who sent it can confirm" in verdict.feedback[0]
    from app.wording import verdict_provenance

    assert verdict_provenance(verdict).startswith("unverified: your image's text states it, as OCR read it")

    # The question's own frame around the span ("per tonne", the question's rate) is no question word repeated.
    models, events = ask("17 crowns per tonne")
    assert [e for e in events if isinstance(e, AnswerReady)][-1].text == "17 crowns" and not models["planner"].prompts

    # An answer the image's text does not state (a bridge question's next hop) is researched as usual.
    models, events = ask("Tulsa")
    assert any(isinstance(e, PlanReady) for e in events) and models["planner"].prompts

    # A page about one side of a comparison states a year, but the other side is not on it: researched.
    page = notice_image(tmp_path / "page.png", ["Daniel Myrick", "Daniel Myrick (born 1963) is a director"])
    models, events = ask("1963", image=page,
                         question="In which year was the older of Marino Girolami and Daniel Myrick born?")
    assert any(isinstance(e, PlanReady) for e in events) and models["planner"].prompts
    assert not any(isinstance(e, Recovery) and e.action == "answered from it, without a plan or a search" for e in events)


def test_an_image_index_match_is_a_caption_only_when_it_is_that_alike(tmp_path, shared_tools, embedder, scripted_model_class):
    from PIL import Image, ImageDraw

    from backend.events import RunStarted
    from backend.tools.image_index import demo_images_dir
    from tests.backend.scripted_model import answer_turn

    drawing = Image.new("RGB", (600, 400), "#f4f0e6")
    ImageDraw.Draw(drawing).ellipse((100, 50, 500, 350), fill="#40e0d0")  # nothing in the index looks like it
    drawing.save(tmp_path / "drawing.png")
    config = served_config(tmp_path)
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    started = {}
    try:
        for name, image in (("flag", demo_images_dir() / "france.png"), ("drawing", tmp_path / "drawing.png")):
            models = {role: scripted_model_class(role) for role in ("planner", "judge", "manager")}
            models["executor"] = scripted_model_class("executor", [answer_turn("France")])
            for model in models.values():
                model.traits = replace(model.traits, small=False, guided_turns=False)
            agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
            events = list(agent.run(RunRequest(question="Which country is this?", image=str(image), method="none")))
            started[name] = next(e for e in events if isinstance(e, RunStarted))
    finally:
        store.close()
    assert started["flag"].caption.startswith("looks like: ") and "(image index, similarity 1.00)" in started["flag"].caption
    assert started["flag"].caption_source == "image-search"
    assert started["drawing"].caption is None and started["drawing"].caption_source is None
