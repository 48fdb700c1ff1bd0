"""The Memory view's "set the right answer": the right answer typed for a memory is feedback on the run
that stored it, through the same path as typing it under the answer on the Research page
(backend.feedback.submit_feedback): the Judge grades the run's answer against it, the memory is
relabelled and keeps it as the taught answer, and it is queued for test-time learning."""

from __future__ import annotations

from app.escaping import escape_markdown
from app.session import AppContext, ReadOnlyModeError
from backend.feedback import FeedbackError, submit_feedback
from backend.judge import Judge
from backend.labels import memory_words
from backend.llm.base import LLMError
from backend.tools.base import offered_tools, query_tool
from memory_db import MemoryNotFoundError, MemoryStoreError, UnreadableMemoryError
from memory_db.provenance import read_provenance


def set_right_answer(ctx: AppContext, request, namespace: str, memory_id: str, typed: str | None) -> str:
    """Feedback with `typed` as the right answer on the run that stored `memory_id` in `namespace`; a
    sentence for the page: what changed, or what to do."""
    if not memory_id:
        return "Open a memory first."
    if not (typed or "").strip():
        return "Type the right answer first."
    try:
        ctx.require_writable()
        memory = ctx.runtime.store.get(memory_id, namespace=namespace)
        run_id = read_provenance(memory.provenance).run_id
        if not run_id:
            return ("⚠️ This memory was not stored by a run of this app (it was imported or learned), so there is no "
                    "answer to grade: ask its question on the Research page and type the right answer there.")
        outcome = submit_feedback(
            store=ctx.runtime.store, runlog=ctx.runtime.runlog, judge=Judge(ctx.runtime.agent.models["judge"]),
            queue=ctx.queue, namespace=namespace, run_id=run_id, user=ctx.user_of(request), right_answer=typed,
            search=query_tool(offered_tools(ctx.runtime.agent.tools, has_image=False, namespace=namespace)),
        )
        now = memory_words(ctx.runtime.store.get(memory_id, namespace=namespace))
    except (FeedbackError, ReadOnlyModeError, MemoryNotFoundError, UnreadableMemoryError, MemoryStoreError,
            LLMError) as exc:
        return f"⚠️ {escape_markdown(exc)}"
    return (f"**The right answer is set.** `{escape_markdown(memory_id[:8])}` now reads: {escape_markdown(now)}.\n\n"
            + "\n".join(f"- {escape_markdown(line)}" for line in outcome.changes))
