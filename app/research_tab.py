"""The research view: ask (Enter or Research), see the answer first (marked working… until the run
is final) with numbered sources; a source opens beside the answer with its cited sentence
highlighted (a document's page from the caller's own documents, a PDF page as an image with the
sentence marked: app/source_view.py), and can be struck as wrong, undone, and the question
re-answered without it. The trace below the answer, one line per step, then feedback; stop a run,
download its report (Markdown, PDF, JSON), reopen past runs. A run whose page closes finishes in the
background, into History."""


from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from app.feedback_panel import FeedbackEvents, FeedbackPanel, build_feedback_panel
from app.question_inputs import QuestionInputs, build_question_inputs
from app.question_run import ActiveRuns, ShownRuns
from app.research_runs import RunEvents
from app.run_history import HistoryEvents, HistoryPanel, build_history_panel
from app.run_view import AnswerBoxPart, build_answer_box, build_trace
from app.session import RUNS_AT_ONCE, AppContext
from app.source_panel import SourceEvents, SourcePanel, build_source_panel
from app.steering import (FollowUpBox, PlanEditor, build_follow_up_box, build_plan_editor, checked_steering,
                          follow_up_steering, own_wording_steering, require_steering)


@dataclass
class ResearchPage:
    """The research page's parts, as built, for wiring their events."""
    run_id: gr.State
    opened: gr.State  # the source open beside the answer, as a strike needs it (app.source_view)
    inputs: QuestionInputs
    answer: AnswerBoxPart
    plan_view: PlanEditor
    follow: FollowUpBox
    source: SourcePanel
    trace: gr.HTML
    feedback: FeedbackPanel
    history: HistoryPanel


@dataclass
class ResearchEvents:
    """The handlers of the page's events, by part."""
    runs: RunEvents
    sources: SourceEvents
    feedback: FeedbackEvents
    history: HistoryEvents


def build_research_tab(ctx: AppContext):
    """Builds the view inside the current Blocks; returns (load_history, history table) for page load."""
    run_id = gr.State(None)
    opened = gr.State({})
    active = ActiveRuns()
    shown = ShownRuns()
    inputs = build_question_inputs(ctx)
    with gr.Row(elem_id="answer-row", equal_height=False):
        with gr.Column(scale=3, min_width=420):
            answer = build_answer_box()
            plan_view = build_plan_editor()  # the plan to review, when "Review the plan first" is on
            follow = build_follow_up_box()
        source = build_source_panel()  # a cited source opens here, beside the answer
    trace = build_trace()
    feedback = build_feedback_panel()
    history = build_history_panel()
    page = ResearchPage(run_id, opened, inputs, answer, plan_view, follow, source, trace, feedback, history)
    events = ResearchEvents(RunEvents(ctx, active, shown), SourceEvents(ctx, shown), FeedbackEvents(ctx, active, shown),
                            HistoryEvents(ctx, active, shown))
    wire_events(ctx, page, events)
    return events.history.load_history, history.table


def wire_events(ctx: AppContext, page: ResearchPage, events: ResearchEvents) -> None:
    """The page's events, in the order the page registers them: a question's run chain (from Research
    or Enter, the plan editor, a follow-up, or Re-answer), the strike buttons, Stop, feedback, the
    history, and the citations and document links of the answer box and the trace."""
    inputs, answer, plan_view, follow, source = page.inputs, page.answer, page.plan_view, page.follow, page.source
    runs, load_history = events.runs, events.history.load_history
    history = page.history.table
    steering = gr.State({})  # what the next run is given: the person's plan, or a follow-up (app.steering)
    run_inputs = [inputs.question, inputs.image, inputs.caption, inputs.ground_truth, inputs.review, steering]
    downloads = answer.downloads
    started_outputs = [inputs.ask, inputs.stop, inputs.run_status, answer.box, *downloads]

    def research(started):
        """A question's run, once `started` (start_run) has set the page up."""
        return (started
                .then(runs.run_question, run_inputs, [answer.box, page.trace, page.run_id, page.feedback.result, *downloads],
                      concurrency_limit=RUNS_AT_ONCE, concurrency_id="research")
                .then(runs.end_run, None, [inputs.ask, inputs.stop, inputs.run_status], concurrency_limit=None)
                .then(runs.after_run, [steering],
                      [plan_view.group, plan_view.note, plan_view.editor, plan_view.drafted, steering],
                      concurrency_limit=None)
                .then(load_history, None, [history]))

    def steered_research(step):
        """A run the person steered, once `step` has set the steering (nothing runs when it refused)."""
        started = (step.then(require_steering, [steering], None, concurrency_limit=None)
                   .success(runs.start_run, None, started_outputs, concurrency_limit=None))
        return research(started)

    steered_research(plan_view.run.click(lambda edited, drafted: checked_steering(ctx, edited, drafted),
                                         [plan_view.editor, plan_view.drafted],
                                         [steering, plan_view.note, plan_view.editor], concurrency_limit=None))

    def ask_follow_up(asked: str, current: str | None, request: gr.Request):
        return follow_up_steering(ctx, asked, current, ctx.namespace_of(request))

    for asked_again in (follow.ask.click, follow.asked.submit):
        steered_research(asked_again(ask_follow_up, [follow.asked, page.run_id],
                                     [steering, follow.rewritten, follow.note, follow.follows]))
    steered_research(follow.research_rewritten.click(own_wording_steering, [follow.rewritten, follow.asked, follow.follows],
                                                     [steering, follow.note], concurrency_limit=None))

    research(gr.on([inputs.ask.click, inputs.question.submit], runs.start_run, None, started_outputs,
                   trigger_mode="once", concurrency_limit=None))
    # Re-answer the question of the source open beside the answer: the same run chain, its question filled in.
    research(source.reanswer.click(lambda source: source.get("question") or gr.update(), [page.opened],
                                   [inputs.question], concurrency_limit=None)
             .then(runs.start_run, None, started_outputs, concurrency_limit=None))
    source.strike.click(events.sources.strike_source, [page.opened], [source.result, *source.buttons],
                        concurrency_limit=None)
    source.unstrike.click(events.sources.unstrike_source, [page.opened], [source.result, *source.buttons],
                          concurrency_limit=None)
    inputs.stop.click(runs.request_stop, None, [inputs.stop, inputs.run_status], concurrency_limit=None)
    feedback = page.feedback
    for button, thumbs in ((feedback.up, "up"), (feedback.down, "down"), (feedback.send, None)):
        (button.click(events.feedback.with_thumbs(thumbs), [page.run_id, feedback.right_answer, feedback.comment],
                      [feedback.result])
         .then(events.feedback.after_feedback, [page.run_id], [answer.box, *downloads])
         .then(load_history, None, [history]))
    page.history.refresh.click(load_history, None, [history])
    reopen_outputs = [answer.box, page.trace, page.run_id, feedback.result, *downloads]
    reopen_id = page.history.reopen_id
    history.select(events.history.pick_history_row, None, [reopen_id]).then(events.history.reopen_run, [reopen_id],
                                                                            reopen_outputs)
    page.history.reopen.click(events.history.reopen_run, [reopen_id], reopen_outputs)
    source_outputs = [source.column, source.text, source.file, page.opened, *source.buttons, source.result]
    answer.box.open_citation(events.sources.show_citation, None, source_outputs, concurrency_limit=None)
    for view in (answer.box, page.trace):
        view.open_source(events.sources.show_source, None, source_outputs, concurrency_limit=None)
