"""The question inputs of the research page: the question (Enter researches it) with Research and
Stop, the plan review switch, example questions, the run's status line and the search index's, and
beside them the right answer if known and an image with its caption."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from app.escaping import escape_markdown
from app.session import AppContext
from app.steering import REVIEW_LABEL

EXAMPLE_QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
# Three kinds of question the sandbox wiki can answer: a comparison, a bridge, a yes/no.
EXAMPLE_QUESTIONS = [
    EXAMPLE_QUESTION,
    "Where was the music festival Billy McFarland was charged with wire fraud for supposed to take place?",
    "Were H. G. Wells and Rubén Darío both English?",
]


def search_status(ctx: AppContext) -> str:
    tool = ctx.runtime.agent.tools.get("search")
    index = getattr(tool, "index", None)
    return f"Search: {escape_markdown(index.search_mode())}." if index is not None else ""


@dataclass
class QuestionInputs:
    question: gr.Textbox
    ask: gr.Button
    stop: gr.Button
    review: gr.Checkbox
    run_status: gr.Markdown
    ground_truth: gr.Textbox
    image: gr.File
    caption: gr.Textbox


def build_question_inputs(ctx: AppContext) -> QuestionInputs:
    with gr.Row():
        with gr.Column(scale=3):
            question = gr.Textbox(label="Question (Enter researches it)", lines=1, max_lines=4,
                                  placeholder=EXAMPLE_QUESTION, elem_id="question")
            with gr.Row():
                ask = gr.Button("Research", variant="primary", elem_id="ask", scale=3)
                stop = gr.Button("Stop", variant="stop", interactive=False, elem_id="stop", scale=1)
            review = gr.Checkbox(label=REVIEW_LABEL, value=False, elem_id="review-plan")
            gr.Examples([[q] for q in EXAMPLE_QUESTIONS], inputs=[question])
            run_status = gr.Markdown(elem_id="run-status")
            search_line = gr.Markdown(search_status(ctx), elem_id="search-status")
            # While the dense vectors are first built, the line follows their progress.
            gr.Timer(10).tick(lambda: search_status(ctx), None, [search_line], show_progress="hidden")
        with gr.Column(scale=2):
            ground_truth = gr.Textbox(label="Right answer, if you know it (the Judge grades against it)",
                                      elem_id="ground-truth")
            # A file, not gr.Image: gr.Image decodes uploads itself and answers a broken file with a bare
            # "Error"; the agent's own check says what is wrong and what to upload instead.
            image = gr.File(label="Image (optional: PNG, JPEG, GIF, WebP)", file_types=["image"],
                            type="filepath", elem_id="image")
            caption = gr.Textbox(label="What the image shows (optional)", elem_id="caption")
    return QuestionInputs(question, ask, stop, review, run_status, ground_truth, image, caption)
