"""A run to take away: a Markdown report for people and the run's events as JSON, both built from
the run's events (live, or reopened from the run log) through backend.replay.

Pure functions; app/run_view.py writes their text into the user's own download folder. What came
from a model, a page or a document is data: escaped in the Markdown as the page escapes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from app.escaping import escape_markdown_file
from app.image_view import NO_OCR_TEXT, OCR_LABEL, image_passage, image_seen, without_image_path
from app.wording import one_line, stored_label
from backend.labels import memory_words, run_words, verdict_words
from app.answer_glance import also_read
from backend.documents.errors import DocumentError
from backend.documents.naming import LOCATOR_SCHEME, Locator
from backend.events import Event, RunStarted, TextDelta, ToolCalled, ToolReturned
from backend.executor import Step
from backend.feedback_queue import FeedbackItem
from backend.replay import RunRecord, replay

REPORT_FORMAT = "mia-run"
THREAD_FORMAT = "mia-thread"  # a follow-up's thread: its runs, first question first
REPORT_VERSION = 1

# -- where a passage comes from ------------------------------------------------------------------
def document_place(url: str | None) -> Locator | None:
    """The collection, file and page (or section) of a `doc://` locator; None for anything else."""
    if not url or not url.startswith(LOCATOR_SCHEME):
        return None
    try:
        return Locator.parse(url)
    except DocumentError:
        return None


def source_label(passage: dict) -> str:
    """Where a passage or a citation comes from, in words: the document and its page, the wiki, the web."""
    place = document_place(passage.get("url"))
    if place is not None:
        where = f"page {place.page}" if place.page is not None else (f"section “{place.section}”" if place.section else "")
        scope = "shared collection" if place.shared else "collection"
        return f"document {place.file} ({scope} {place.collection})" + (f", {where}" if where else "")
    source = str(passage.get("source") or "")
    if source.startswith("doc:"):
        return f"document ({source[4:] or 'collection'})"
    if source.startswith("wiki:"):
        return f"wiki ({source[5:]})"
    return {"web": "web search", "page": "web page", "image-index": "image index",
            "image-ocr": "your image, read by OCR"}.get(source, source or "retrieved")


def web_link(url: str | None) -> str | None:
    """An http(s) address with every character that could end a link percent-encoded, else None
    (a doc:// locator or anything else is not a link)."""
    if not url or not url.lower().startswith(("http://", "https://")):
        return None
    return quote(url, safe=":/?#@!$&'*+,;=%-._~")


# -- the passages a run retrieved ------------------------------------------------------------------
def retrieved_passages(events: Iterable[Event]) -> list[dict]:
    """Every passage the run's tools returned, in order (the text as retrieved)."""
    return [p for e in events if isinstance(e, ToolReturned) for p in e.passages]


def cited_passage(citation: dict, passages: Sequence[dict]) -> dict | None:
    """The retrieved passage a citation points at: same locator (or, without one, same title), the
    one holding the cited sentence first."""
    url, title, sentence = citation.get("url"), citation.get("title"), (citation.get("sentence") or "").strip()
    same = [p for p in passages if (url and p.get("url") == url) or (not url and p.get("title") == title)]
    if not same and url:
        same = [p for p in passages if p.get("title") == title and not p.get("url")]
    if not same:
        return None
    if sentence:
        holding = [p for p in same if sentence[:80] in (p.get("text") or "")]
        if holding:
            return max(holding, key=lambda p: len(p.get("text") or ""))
    return max(same, key=lambda p: len(p.get("text") or ""))


# -- the steps a run took --------------------------------------------------------------------------
def unrecorded_steps(events: Sequence[Event], record: RunRecord) -> list[Step]:
    """Tool steps the events show but no StepTaken recorded: a run stopped (or failed) inside an
    Executor round ends before its round's steps are logged."""
    done = max((s.turn for s in record.steps), default=0)
    steps: list[Step] = []
    for event in events:
        if isinstance(event, ToolCalled) and event.turn > done:
            steps.append(Step(turn=event.turn, tool=event.name, arguments=dict(event.arguments)))
        elif isinstance(event, ToolReturned) and event.turn > done and steps and steps[-1].turn == event.turn:
            steps[-1].ok = event.ok
            steps[-1].titles = [p.get("title", "") for p in event.passages]
    return steps


def query_text(arguments: dict, limit: int = 200) -> str:
    """What a tool call asked for, in a line: its queries quoted, else its arguments as JSON."""
    texts: list[str] = []
    for value in arguments.values():
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            texts.extend(str(v) for v in value if isinstance(v, (str, int, float)))
    if texts:
        return one_line(", ".join(f"“{t}”" for t in texts), limit)
    return one_line(json.dumps(arguments, ensure_ascii=False), limit) if arguments else ""


def run_status(record: RunRecord) -> str:
    """final | stopped | failed | unfinished"""
    if record.failure is not None:
        return "failed"
    if record.finished is None:
        return "unfinished"
    return "stopped" if record.finished.stopped else "final"


def _when(moment: float | None) -> str:
    if moment is None:
        return "-"
    return datetime.fromtimestamp(moment, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def stats_text(stats: dict) -> str:
    return (
        f"{int(stats.get('llm_calls', 0))} LLM calls, {int(stats.get('prompt_tokens', 0))} prompt + "
        f"{int(stats.get('completion_tokens', 0))} completion tokens, {int(stats.get('tool_calls', 0))} tool calls, "
        f"{stats.get('wall_seconds', 0):.1f} s (LLM {stats.get('llm_seconds', 0):.1f} s, tools {stats.get('tool_seconds', 0):.1f} s)"
    )


def _blockquote(text: str) -> list[str]:
    lines = (text or "").strip().splitlines()
    return [f"   > {escape_markdown_file(line)}" if line.strip() else "   >" for line in lines] or ["   >"]


def feedback_lines(feedback: FeedbackItem) -> list[str]:
    """A person's feedback on the run: their verdict, and the right answer they typed, marked as a
    person's correction (not the Judge's) with who gave it and when."""
    who = f"{escape_markdown_file(feedback.user)}, {_when(feedback.at)}"
    lines = ["## Feedback from a person", "", f"- Marked **{escape_markdown_file(feedback.label_after)}** by {who}"]
    if feedback.right_answer:
        right_answer = escape_markdown_file(feedback.right_answer)
        lines.append(f"- **Correction by a person**: the right answer is **{right_answer}** "
                     f"(typed by {who}; a person's word, not the Judge's)")
    if feedback.comment:
        lines.append(f"- Comment: {escape_markdown_file(one_line(feedback.comment, 2000))}")
    return lines + [""]


APPENDIX = "# Appendix: the run log"
STATUS_WORDS = {
    "final": "final (after reflection)",
    "stopped": "stopped by the user: the answer so far, not judged, no memory stored",
    "failed": "failed",
    "unfinished": "unfinished (the run log ends before the run did)",
}


def image_lines(started: RunStarted | None) -> list[str]:
    """The report's section on the question's image: its file's name (never the upload's path), the
    caption with its source in words, and the text OCR read in it; nothing without an image."""
    seen = image_seen(started)
    if seen is None:
        return []
    sentence = seen.caption_sentence[:1].upper() + seen.caption_sentence[1:]
    lines = ["## Your image", "", f"- File: {escape_markdown_file(seen.name)}", f"- {escape_markdown_file(sentence)}"]
    if seen.ocr_text:
        lines.append(f"- {OCR_LABEL}:")
        lines += _blockquote(seen.ocr_text)
    else:
        lines.append(f"- {NO_OCR_TEXT}")
    return lines + [""]


def stored_words(event, memory=None) -> str:
    """The stored memory's label as every view shows it: the memory as stored now (`memory`, the run's
    own), else as the run stored it; an earlier run's memory it was counted on says so."""
    label = memory_words(memory) if memory is not None else stored_label(event)
    if event.kept_from:
        return (f"this run was counted on the memory of an earlier run of this question (run {event.kept_from}), "
                f"kept with its own label: {label}")
    return label


def report_markdown(events: Sequence[Event], *, feedback: FeedbackItem | None = None, memory=None,
                    follow_ups: Sequence[Sequence[Event]] = ()) -> str:
    """The run as a Markdown report that reads as a brief (app.brief: the question, the answer, how it
    was found with a citation for each finding, what stays unverified, the thread's `follow_ups`, each
    a run's events), then the run log as an appendix: answer, citations with the passages they cite,
    the plan(s), the steps, reflection, verdict and memory. `feedback`: a person's later verdict, with
    the right answer they typed (marked as theirs, with who and when)."""
    from app.brief import brief_markdown, compose_brief

    events = [e for e in events if not isinstance(e, TextDelta)]
    record = replay(events)
    passages = retrieved_passages(events)
    ocr_passage = image_passage(record.started)
    if ocr_passage is not None:  # the text OCR read in the image, as the Executor's session held it
        passages.append(ocr_passage)
    status = run_status(record)
    started = record.started
    lines = [f"# Research report: {escape_markdown_file(one_line(record.question) or '(no question)')}", ""]
    lines += [f"- Run: `{escape_markdown_file(record.run_id)}`",
              f"- Started: {_when(started.at if started else None)}", f"- Status: {STATUS_WORDS[status]}"]
    if started is not None and started.ground_truth:
        lines.append(f"- Right answer given: {escape_markdown_file(started.ground_truth)}")
    lines.append("")
    lines += brief_markdown(compose_brief([events, *follow_ups], feedback=feedback))
    lines += [APPENDIX, ""]
    lines += image_lines(started)

    answer = record.last_answer_event
    lines += ["## Answer", ""]
    if record.failure is not None:
        lines += [f"The run failed: {escape_markdown_file(record.failure.message)}", ""]
    if answer is not None:
        marks = "".join(f" [{c.get('n', i)}]" for i, c in enumerate(answer.sources, 1))
        lines += [f"**{escape_markdown_file(answer.text or '(no answer)')}**{marks}", ""]
        if answer.forced:
            lines += [f"_Answer forced: {escape_markdown_file(answer.reason)}._", ""]
        if record.first_answer and record.first_answer != answer.text:
            lines += [f"Before the replan the answer was: {escape_markdown_file(record.first_answer)}", ""]
    elif record.failure is None:
        lines += ["No answer was given." if status != "stopped" else "The run was stopped before any answer.", ""]
    if record.verdict is not None:
        v = record.verdict
        label, judged = run_words(v, feedback, memory), verdict_words(v)  # `memory`: the run's own, as stored now
        if label != judged:
            how = f"the run's own verdict was {escape_markdown_file(judged)}"
        elif v.source == "ground_truth" and v.ground_truth:
            how = f"the right answer: {escape_markdown_file(v.ground_truth)}, by {escape_markdown_file(v.method)}"
        elif v.source == "judge":
            how = f"by {escape_markdown_file(v.method)}" + (f", confidence {v.confidence:.2f}" if v.confidence is not None else "")
        else:
            how = ""
        lines += [f"**Verdict:** {escape_markdown_file(label)}" + (f", {how}" if how else ""), ""]
    if feedback is not None:
        lines += feedback_lines(feedback)

    lines += ["## Sources", ""]
    if answer is not None and answer.sources:
        for i, citation in enumerate(answer.sources, 1):
            n = citation.get("n", i)
            link = web_link(citation.get("url"))
            where = source_label(citation)
            url = citation.get("url")
            locator = f" — <{link}>" if link else (f" — {escape_markdown_file(url)}" if url else "")
            lines.append(f"{n}. **{escape_markdown_file(citation.get('title') or '(untitled)')}**"
                         f" ({escape_markdown_file(where)}){locator}")
            if citation.get("sentence"):
                lines.append(f"   - Cited sentence: “{escape_markdown_file(one_line(citation['sentence']))}”")
            passage = cited_passage(citation, passages)
            if passage is not None and passage.get("text"):
                lines.append("   - Passage as retrieved:")
                lines += _blockquote(passage["text"])
            else:
                lines.append("   - (the passage's text is not in this run's events)")
        lines.append("")
    elif answer is not None and answer.text:
        lines += ["No retrieved passage states this answer.", ""]
    else:
        lines += ["None.", ""]
    also = also_read(answer) if answer is not None else []
    if also:
        lines += ["Also read (read, not cited): " + "; ".join(escape_markdown_file(t) for t in also), ""]

    lines += ["## Plan", ""]
    if not record.plans:
        lines += ["No plan (this method does not plan, or the run ended first).", ""]
    for plan in record.plans:
        if plan.revision:
            lines += [f"### Supplementary plan (after reflection {plan.revision})", ""]
        lines += [f"{i}. {escape_markdown_file(step)}" for i, step in enumerate(plan.steps, 1)] or ["(no steps)"]
        if plan.recovered:
            lines.append(f"\n_Recovery: {escape_markdown_file(plan.recovered)}_")
        if plan.chosen:
            lines.append(f"\n_Chosen: {escape_markdown_file(plan.chosen)}_")
        lines.append("")

    steps = list(record.steps) + unrecorded_steps(events, record)
    image = started.image if started is not None else None
    lines += ["## Steps", ""]
    if not steps:
        lines += ["No Executor steps.", ""]
    for step in steps:
        if step.tool:
            found = ("; ".join(escape_markdown_file(t) for t in step.titles)
                     or ("error" if step.ok is False else "nothing"))
            asked = query_text(without_image_path(step.arguments, image))
            lines.append(f"- Turn {step.turn}: {escape_markdown_file(step.tool)}"
                         f" {escape_markdown_file(asked)} → {found}")
        elif step.answer is not None:
            lines.append(f"- Turn {step.turn}: answered {escape_markdown_file(step.answer)}")
        else:
            lines.append(f"- Turn {step.turn}: no action")
        if step.think:
            lines.append(f"  - Thought: {escape_markdown_file(one_line(step.think, 600))}")
        if step.recovery:
            lines.append(f"  - Recovery: {escape_markdown_file(step.recovery)}")
    lines.append("")

    if record.reflections:
        lines += ["## Reflection", ""]
        lines += [f"- Round {r.round}: {'replan' if r.replan else 'the answer stands'}" for r in record.reflections]
        lines.append("")
    if record.memory_stored is not None:
        m = record.memory_stored
        lines += ["## Memory stored", "",
                  f"`{escape_markdown_file(m.memory_id)}` ({escape_markdown_file(stored_words(m, memory))},"
                  f" {escape_markdown_file(m.question_type)}): {escape_markdown_file(one_line(m.summary, 2000))}", ""]
    if record.finished is not None:
        lines += ["## Run summary", "", stats_text(record.finished.stats), ""]
    return "\n".join(lines)


def run_json(events: Sequence[Event]) -> str:
    """The run as JSON: its events as the run log keeps them (event dicts, TextDelta left out), with
    the uploaded image's path on the server replaced by its file's name."""
    kept = [e for e in events if not isinstance(e, TextDelta)]
    started = next((e for e in kept if isinstance(e, RunStarted)), None)
    image = started.image if started is not None else None
    document = {"format": REPORT_FORMAT, "version": REPORT_VERSION, "run_id": kept[0].run_id if kept else "",
                "question": started.question if started else "",
                "events": [without_image_path(e.to_dict(), image) for e in kept]}
    return json.dumps(document, ensure_ascii=False, indent=1)


def report_names(run_id: str) -> tuple[str, str]:
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", run_id or "run")[:40] or "run"
    return f"mia-report-{safe}.md", f"mia-run-{safe}.json"


def write_report_files(events: Sequence[Event], folder: Path, *, feedback: FeedbackItem | None = None, memory=None,
                       follow_ups: Sequence[Sequence[Event]] = ()) -> tuple[Path, Path]:
    """The Markdown report and the JSON run, written into `folder`; returns their paths. With
    `follow_ups` (a thread: `events` its first question's run), one report and one JSON of every run."""
    kept = [e for e in events if not isinstance(e, TextDelta)]
    md_name, json_name = report_names(kept[0].run_id if kept else "run")
    md_path, json_path = folder / md_name, folder / json_name
    md_path.write_text(report_markdown(kept, feedback=feedback, memory=memory, follow_ups=follow_ups), encoding="utf-8")
    json_path.write_text(thread_json([kept, *follow_ups]) if follow_ups else run_json(kept), encoding="utf-8")
    return md_path, json_path


def thread_json(runs: Sequence[Sequence[Event]]) -> str:
    """A thread as JSON: each run as run_json writes it, first question first."""
    document = {"format": THREAD_FORMAT, "version": REPORT_VERSION, "thread": runs[0][0].run_id if runs[0] else "",
                "runs": [json.loads(run_json(run)) for run in runs]}
    return json.dumps(document, ensure_ascii=False, indent=1)
