"""The learning view: test-time learning is not running yet; the feedback queue it will read is real."""

from __future__ import annotations

from datetime import datetime

import gradio as gr

from app.render import esc
from app.session import AppContext

NOT_RUNNING = (
    "**Test-time learning is not running yet.** Feedback you give on answers is relabelling memories "
    "and updating win rates now, and it is queued here for the learner that will update the Planner's "
    "weights (TTRL). Until that learner is built, the queue only grows."
)
QUEUE_COLUMNS = ["when", "user", "run id", "question", "label before", "label after", "right answer", "comment"]


def build_learning_tab(ctx: AppContext):
    """Returns (on_load function, its outputs) for page load."""
    gr.Markdown(NOT_RUNNING, elem_id="learning-status")
    length = gr.Markdown(elem_id="queue-length")
    refresh = gr.Button("Refresh", size="sm", elem_id="refresh-queue")
    table = gr.Dataframe(headers=QUEUE_COLUMNS, interactive=False, wrap=True, max_height=420, elem_id="queue-table",
                         column_widths=["11%", "7%", "9%", "31%", "9%", "9%", "12%", "12%"])

    def load(request: gr.Request):
        admin = ctx.users is not None and ctx.is_admin(request)
        items = ctx.queue.items(None if admin else ctx.namespace_of(request))
        rows = [
            [datetime.fromtimestamp(i.at).strftime("%Y-%m-%d %H:%M"), i.user, i.run_id, i.question,
             i.label_before, i.label_after, i.right_answer or "", i.comment or ""]
            for i in reversed(items)
        ]
        whose = "in all namespaces" if admin else "from you"
        return f"**{len(items)}** feedback items {whose} are waiting in the queue (`{esc(ctx.queue.path.name)}`).", rows

    refresh.click(load, None, [length, table])
    return load, [length, table]
