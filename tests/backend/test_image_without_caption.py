"""An image with no caption and no close match in the image index is researched from the person's words
alone: its file's name reaches no model (a flag saved as "tricolour_romania.png" had been searched as
"tricolour romania"), and the Judge gives what is read from no evidence no high confidence."""

from __future__ import annotations

from dataclasses import replace

from PIL import Image

from backend.agent import ResearchAgent, RunRequest
from backend.events import RunStarted, ToolCalled, ToolReturned, VerdictReady
from backend.judge import UNSTATED_CONFIDENCE
from backend.llm.base import Choice
from backend.runlog import RunLog
from memory_db import MemoryStore
from tests.backend.conftest import scripted_config
from tests.backend.scripted_model import answer_turn, tool_call_turn


def tricolour(path):
    """Blue, yellow and red bands: a flag the demo index does not hold (Romania's is not among its 16)."""
    image = Image.new("RGB", (300, 200))
    for band, colour in enumerate(((0, 43, 127), (252, 209, 22), (206, 17, 38))):
        image.paste(colour, (100 * band, 0, 100 * (band + 1), 200))
    image.save(path)
    return path


def test_an_uncaptioned_unmatched_image_is_never_researched_by_its_file_name(tmp_path, shared_tools, embedder,
                                                                            scripted_model_class):
    image = tricolour(tmp_path / "tricolour_romania.png")
    models = {role: scripted_model_class(role) for role in ("planner", "manager")}
    models["executor"] = scripted_model_class("executor", [tool_call_turn("image_search", image="uploaded"),
                                                           answer_turn("Moldova")])

    class ConfidentJudge(type(models["planner"])):
        def choose(self, messages, options, *, prefill=""):
            self.prompts.append(messages)
            label = "yes" if "yes" in options else options[0]
            return Choice(label=label, logprobs={o: (0.0 if o == label else -2.944) for o in options}, method="scripted")

    models["judge"] = ConfidentJudge("judge")
    for model in models.values():
        model.traits = replace(model.traits, small=False, guided_turns=False)
    config = scripted_config(tmp_path, max_turns=3, guided_actions="off", read_by_quote=False)
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    try:
        agent = ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
        events = list(agent.run(RunRequest(question="Which country's flag is this?", image=str(image), method="none")))
    finally:
        store.close()
    started = next(e for e in events if isinstance(e, RunStarted))
    assert started.caption is None  # no caption: nothing in the index is that alike
    [returned] = [e for e in events if isinstance(e, ToolReturned)]
    assert returned.name == "image_search" and returned.passages == []
    shown = " ".join(m["content"] for model in models.values() for prompt in model.prompts for m in prompt)
    assert "tricolour" not in shown.lower() and "romania" not in shown.lower()
    assert all(e.name == "image_search" for e in events if isinstance(e, ToolCalled))
    verdict = next(e for e in events if isinstance(e, VerdictReady))
    assert verdict.confidence is not None and verdict.confidence <= UNSTATED_CONFIDENCE  # read from no evidence
