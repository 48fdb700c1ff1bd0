"""The research page's steering: the plan reviewed before it runs (backend.plan_review), and follow-up
questions read with their thread (backend.follow_up). app/research_tab.py places these components and
runs what they set up through its own run chain: a steering dict says what the next run is given."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

import gradio as gr

from app.escaping import escape_html, escape_markdown
from app.session import AppContext
from app.transcript import RunTranscript
from backend.agent import RunRequest
from backend.follow_up import FollowUp
from backend.inputs import InputError
from backend.llm.base import LLMError
from backend.plan_review import PlanDraft, PlanError, checked_plan, parse_plan_text, plan_text

REVIEW_LABEL = "Review the plan first (edit it before it runs)"
PLAN_HELP = ("**The Planner's plan.** Edit it before it runs: one {noun} a line; reword, add, remove or move lines; "
             "#1, #2 stand for the answers of the sub-questions above. **Run this plan** researches it exactly as "
             "written, as your plan.")
FOLLOW_UP_HELP = "Read with this answer's thread: “she”, “it”, “this film” stand for what came before."
OWN_WORDING = "Your wording."


@dataclass
class PlanEditor:
    group: gr.Group
    note: gr.Markdown
    editor: gr.Textbox
    run: gr.Button
    drafted: gr.State  # {"question", "steps", "shape"}: the Planner's draft, given back when an edit is refused


@dataclass
class FollowUpBox:
    asked: gr.Textbox
    ask: gr.Button
    rewritten: gr.Textbox
    research_rewritten: gr.Button
    note: gr.Markdown
    follows: gr.State  # the run the follow-up shown follows, asked again in other words


def build_plan_editor() -> PlanEditor:
    with gr.Group(visible=False, elem_classes=["plan-review"]) as group:
        note = gr.Markdown(elem_id="plan-note")
        editor = gr.Textbox(label="Your plan (one a line)", lines=4, max_lines=12, elem_id="plan-editor")
        run = gr.Button("Run this plan", variant="primary", size="sm", elem_id="run-plan")
    return PlanEditor(group, note, editor, run, gr.State({}))


def build_follow_up_box() -> FollowUpBox:
    with gr.Group(elem_classes=["follow-up"]):
        with gr.Row():
            asked = gr.Textbox(label="Ask a follow-up", placeholder="When was she born?", scale=4, lines=1,
                               elem_id="follow-up-question", info=FOLLOW_UP_HELP)
            ask = gr.Button("Ask a follow-up", size="sm", scale=1, elem_id="ask-follow-up")
        with gr.Row():
            rewritten = gr.Textbox(label="Researched as (change it and research your wording)", scale=4, lines=1,
                                   elem_id="follow-up-rewrite")
            research_rewritten = gr.Button("Research this wording", size="sm", scale=1, elem_id="research-rewrite")
        note = gr.Markdown(elem_id="follow-up-note")
    return FollowUpBox(asked, ask, rewritten, research_rewritten, note, gr.State(None))


class PerPage:
    """One value for each page (Gradio session), kept until taken; the oldest pages' go first."""

    def __init__(self, size: int = 256) -> None:
        self._values: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.Lock()
        self._size = size

    def put(self, session: str, value) -> None:
        with self._lock:
            self._values[session] = value
            self._values.move_to_end(session)
            while len(self._values) > self._size:
                self._values.popitem(last=False)

    def take(self, session: str):
        with self._lock:
            return self._values.pop(session, None)


def steering_key(steer: dict | None) -> str:
    """What a steering says, as one comparable string."""
    return json.dumps(steer or {}, sort_keys=True, default=str)


def steering_left(spent: str | None, steer: dict | None) -> dict | None:
    """The page's steering once a run has ended: spent ({}) when it is the one that run was given,
    else None (leave it): a follow-up asked while the run's last updates were arriving is the next
    run's, not this one's."""
    return {} if spent is None or steering_key(steer) == spent else None


def review_wanted(review: bool, steer: dict | None) -> bool:
    """A question is drafted for review (not researched) when the switch is on and the run is given
    neither a reviewed plan nor a follow-up."""
    return bool(review) and not (steer or {}).get("plan") and not (steer or {}).get("follow_up")


def draft_for_review(ctx: AppContext, request: RunRequest) -> PlanDraft | str:
    """The Planner's plan for the request's question, or a sentence saying why there is none."""
    try:
        return ctx.agent.draft_plan(request)
    except (InputError, LLMError) as exc:
        return str(exc)


def drafting_box(draft: PlanDraft | str) -> str:
    """The answer box while a plan waits for review."""
    said = ("The Planner's plan is below: edit it, then press Run this plan." if isinstance(draft, PlanDraft)
            else f"❌ {draft}")
    return (f'<div class="answer-box idle" data-state="review"><p class="answer-placeholder">'
            f'{escape_html(said)}</p></div>')


def editor_shown(draft: PlanDraft | str | None):
    """The plan editor's updates (group, note, editor, drafted) after a run step: a draft to review, or hidden."""
    if draft is None or isinstance(draft, str):
        return gr.Group(visible=False), "", gr.update(), {}
    noun = "sub-question" if draft.shape == "subquestions" else "step"
    note = PLAN_HELP.format(noun=noun)
    if draft.note:
        note += f"\n\n_The Planner's text needed: {escape_markdown(draft.note)}._"
    return (gr.Group(visible=True), note, draft.text,
            {"question": draft.question, "steps": list(draft.steps), "shape": draft.shape})


def checked_steering(ctx: AppContext, edited: str, drafted: dict) -> tuple[dict, str, str]:
    """(steering for the run, the editor's note, the editor's text) for the plan as the person edited
    it: refused with what to change and the Planner's plan given back, or set to run as written."""
    if not drafted or not drafted.get("steps"):
        return {}, "⚠️ There is no plan to run: turn on *Review the plan first* and press Research.", edited
    shape = drafted.get("shape") or ctx.runtime.config.agent.plan_shape
    try:
        plan = checked_plan(parse_plan_text(edited), shape, ctx.runtime.config.agent.max_question_chars)
    except PlanError as exc:
        return ({}, f"⚠️ {escape_markdown(exc)} The Planner's plan is back in the editor.", plan_text(drafted["steps"]))
    return ({"plan": plan, "drafted": list(drafted["steps"]), "question": drafted.get("question")},
            "Researching your plan as written…", plan_text(plan))


def steered(request: RunRequest, steer: dict | None) -> RunRequest:
    """The page's run request with what the person steered: their plan, or a follow-up's wording and thread."""
    steer = steer or {}
    if steer.get("plan"):
        request = replace(request, question=steer.get("question") or request.question, plan=list(steer["plan"]),
                          drafted_plan=list(steer.get("drafted") or []) or None)
    if steer.get("follow_up"):
        follow = steer["follow_up"]
        request = replace(request, question=steer["question"], image=None, caption=None, ground_truth=None,
                          follow_up=FollowUp(follow["of_run"], follow["asked"], follow.get("how") or ""))
    return request


def require_steering(steer: dict | None) -> None:
    """Between a steering step and its run: nothing runs when the step refused (its note says why)."""
    if not steer:
        raise gr.Error("Nothing to run: see the note above.", visible=False, print_exception=False)


def follow_up_steering(ctx: AppContext, asked: str, current_run: str | None, namespace: str):
    """(steering, the rewritten question, the note, the run it follows) for a follow-up typed under the
    answer shown: made standalone with its thread, the rewrite shown for the person to change."""
    if not current_run:
        return {}, gr.update(), "⚠️ Ask a question first (or reopen a past run): a follow-up goes under an answer.", None
    try:
        made = ctx.agent.read_follow_up(asked or "", namespace, current_run)
    except (InputError, LLMError) as exc:
        return {}, gr.update(), f"⚠️ {escape_markdown(exc)}", current_run
    steer = {"question": made.question, "follow_up": {"of_run": current_run, "asked": (asked or "").strip(),
                                                       "how": made.how}}
    return steer, made.question, escape_markdown(made.how), current_run


def own_wording_steering(wording: str, asked: str, follows: str | None):
    """(steering, the note) for the follow-up researched in the person's own wording."""
    if not follows:
        return {}, "⚠️ Ask a follow-up first: its wording can then be changed here."
    if not (wording or "").strip():
        return {}, "⚠️ The wording is empty: type the question to research."
    return ({"question": wording.strip(), "follow_up": {"of_run": follows, "asked": (asked or wording).strip(),
                                                        "how": OWN_WORDING}}, "Researching your wording…")


def attach_thread(ctx: AppContext, namespace: str, transcript: RunTranscript, follows: str | None) -> None:
    """A follow-up's transcript with its thread's earlier runs (shown above its answer, and in its report)."""
    if not follows or ctx.runtime.runlog is None:
        return
    try:
        thread = ctx.agent.thread(namespace, follows)
    except InputError:
        return
    transcript.earlier = [ctx.runtime.runlog.load(namespace, turn.run_id) for turn in thread.turns]


def thread_of_logged(ctx: AppContext, namespace: str, transcript: RunTranscript) -> None:
    """A reopened run with its thread's earlier runs, when it is a follow-up."""
    started = transcript.started
    follows = (started.follow_up or {}).get("follows") if started is not None else None
    attach_thread(ctx, namespace, transcript, follows)
