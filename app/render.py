"""Turning the agent's event stream into what people read: terminal text and chat messages.

Everything that came from a model, a page or a memory is escaped before it reaches the browser.
"""

from __future__ import annotations

import html
import json
import re
from typing import Iterable

from backend.events import (
    AnswerReady,
    Event,
    ExecutorThought,
    MemoriesRetrieved,
    MemoryStored,
    PlanReady,
    ReflectionDecided,
    Recovery,
    RunFailed,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCalled,
    ToolReturned,
    VerdictReady,
)


def summary_origin(source: str) -> str:
    """How a stored memory's text was made, in words: by the model, from the trace, or kept as a case."""
    return "kept as a case: plan and outcome" if source == "case" else f"summary by {source}"


def esc(text: object) -> str:
    """Escape for the browser: HTML entities, and markdown's link/image/emphasis triggers."""
    escaped = str(text if text is not None else "")
    for ch in "\\`*_[]|#":
        escaped = escaped.replace(ch, "\\" + ch)
    # Quotes stay: the text lands in element content, never inside an attribute.
    return html.escape(escaped, quote=False)


def safe_url(url: str | None) -> str | None:
    """An http(s) URL made safe to put in a markdown link target, or None."""
    if not url or not url.lower().startswith(("http://", "https://")):
        return None
    return html.escape(url, quote=True).replace(" ", "%20").replace("(", "%28").replace(")", "%29")


_MEMORY_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")


def memory_link(memory_id: str) -> str:
    """A link that opens the memory in the Memory view (a new page at ?memory=ID)."""
    if not _MEMORY_ID.match(memory_id):
        return f"`{esc(memory_id[:8])}`"
    return f"[`{memory_id[:8]}`](?memory={memory_id})"


def _args_text(arguments: dict) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def _stats_text(stats: dict) -> str:
    return (
        f"{int(stats.get('llm_calls', 0))} LLM calls, {int(stats.get('prompt_tokens', 0))} prompt + "
        f"{int(stats.get('completion_tokens', 0))} completion tokens, {int(stats.get('tool_calls', 0))} tool calls, "
        f"{stats.get('wall_seconds', 0):.1f} s (LLM {stats.get('llm_seconds', 0):.1f} s, tools {stats.get('tool_seconds', 0):.1f} s)"
    )


# -- terminal -----------------------------------------------------------------------------------
# Control characters but tab and newline: in a question, an answer or a page they could move the
# cursor, recolour or retitle the terminal; printed as visible escapes instead.
TERMINAL_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    return TERMINAL_CONTROLS.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def json_for_terminal(data: object) -> str:
    """One JSON line; json.dumps escapes C0 controls, this also escapes DEL and the C1 controls."""
    return TERMINAL_CONTROLS.sub(lambda found: f"\\u{ord(found.group()):04x}", json.dumps(data, ensure_ascii=False))


def event_to_text(event: Event) -> str:
    """One event as plain terminal lines (no HTML escaping: a terminal renders none; control
    characters made visible)."""
    return terminal_safe(_event_lines(event))


def _event_lines(event: Event) -> str:
    if isinstance(event, RunStarted):
        extra = f"\nImage: {event.image} (caption: {event.caption or 'none'}, from {event.caption_source or '-'})" if event.image else ""
        return f"Question: {event.question}{extra}"
    if isinstance(event, MemoriesRetrieved):
        lines = [f"Memories: {len(event.successful)} successful, {len(event.failed)} failed"]
        for label, items in (("+", event.successful), ("-", event.failed)):
            for m in items:
                lines.append(f"  {label} [{m['id'][:8]}] win {m['win_rate']:.2f} score {m['score']:.2f}: {m['question']}")
        return "\n".join(lines)
    if isinstance(event, PlanReady):
        title = "Plan" if event.revision == 0 else f"Supplementary plan (reflection {event.revision})"
        lines = [f"{title}:"] + [f"  {i}. {s}" for i, s in enumerate(event.steps, 1)]
        if event.recovered:
            lines.append(f"  (recovery: {event.recovered})")
        return "\n".join(lines)
    if isinstance(event, ExecutorThought):
        return f"[turn {event.turn}] think: {event.text}"
    if isinstance(event, ToolCalled):
        return f"[turn {event.turn}] tool call: {event.name} {_args_text(event.arguments)}"
    if isinstance(event, ToolReturned):
        if not event.ok:
            return f"[turn {event.turn}] tool error ({event.name}): {event.error}"
        titles = "; ".join(p["title"] for p in event.passages) or "(no passages)"
        return f"[turn {event.turn}] tool response ({event.name}, {event.seconds:.2f} s): {titles}"
    if isinstance(event, Recovery):
        return f"[turn {event.turn}] recovery: {event.reason} -> {event.action}"
    if isinstance(event, AnswerReady):
        forced = f" (forced: {event.reason})" if event.forced else ""
        marks = "".join(f" [{s.get('n', i)}]" for i, s in enumerate(event.sources, 1))
        lines = [f"Answer{forced}: {event.text or '(no answer)'}{marks}"]
        for i, s in enumerate(event.sources, 1):
            sentence = f": \"{s['sentence']}\"" if s.get("sentence") else ""
            lines.append(f"  [{s.get('n', i)}] {s.get('url') or s['title']}{sentence}")
        if not event.sources and event.text:
            lines.append("  (no retrieved passage states this answer)")
        return "\n".join(lines)
    if isinstance(event, ReflectionDecided):
        return f"Reflection {event.round}: replan = {'yes' if event.replan else 'no'}"
    if isinstance(event, VerdictReady):
        return f"Verdict: {event.label}, {verdict_provenance(event)}"
    if isinstance(event, MemoryStored):
        label = "correct" if event.correct else "incorrect"
        return f"Memory stored [{event.memory_id[:8]}] ({label}, {event.question_type}, {summary_origin(event.summary_source)}): {event.summary}"
    if isinstance(event, RunFinished):
        return f"Done: {_stats_text(event.stats)}"
    if isinstance(event, RunFailed):
        return f"Error: {event.message}"
    return str(event.to_dict())


def verdict_provenance(event: VerdictReady) -> str:
    """How a verdict was reached, in words: verified against ground truth, or the Judge's opinion."""
    if event.verified:
        return f"verified against the ground truth {event.ground_truth!r} by {event.method}"
    confidence = f", confidence {event.confidence:.2f}" if event.confidence is not None else ""
    return f"unverified: the Judge's opinion without ground truth ({event.method}{confidence}); give a thumb or the right answer to verify it"


# -- chat messages (Gradio) ---------------------------------------------------------------------
def _message(content: str, title: str | None = None, status: str | None = None, duration: float | None = None) -> dict:
    message: dict = {"role": "assistant", "content": content}
    if title:
        metadata: dict = {"title": title}
        if status:
            metadata["status"] = status
        if duration is not None:
            metadata["duration"] = round(duration, 2)
        message["metadata"] = metadata
    return message


def _passages_markdown(passages: list[dict], max_chars: int = 400) -> str:
    parts = []
    for p in passages:
        text = (p.get("text") or "")[:max_chars]
        url = safe_url(p.get("url"))
        link = f" ([link]({url}))" if url else ""
        parts.append(f"**{esc(p['title'])}**{link}: {esc(text)}")
    return "\n\n".join(parts) or "(no passages)"


class ChatTranscript:
    """Accumulates chat messages from events; a tool call and its response share one entry."""

    def __init__(self) -> None:
        self.messages: list[dict] = []
        self._draft: dict | None = None
        self._open_tool: dict | None = None
        self.answer: str = ""
        self.run_id: str | None = None
        self.memory_id: str | None = None
        self.verdict: str | None = None
        self.used_memory_ids: list[str] = []

    def add(self, event: Event) -> None:
        self.run_id = event.run_id
        m = self.messages
        if isinstance(event, TextDelta):
            # Live text of the turn being generated; replaced by the step it becomes.
            if self._draft is None:
                self._draft = _message("", f"✍️ Executor writing (turn {event.turn})", "pending")
                m.append(self._draft)
            self._draft["content"] += esc(event.text)
            return
        if self._draft is not None:
            m.remove(self._draft)
            self._draft = None
        if isinstance(event, RunStarted):
            image = f"\n\n(image attached; caption: {esc(event.caption or 'none')}, from {esc(event.caption_source or '-')})" if event.image else ""
            m.append({"role": "user", "content": esc(event.question) + image})
        elif isinstance(event, MemoriesRetrieved):
            self.used_memory_ids = [x["id"] for x in event.successful + event.failed]
            lines = []
            for label, items in (("successful strategy", event.successful), ("failure lesson", event.failed)):
                for x in items:
                    lines.append(
                        f"- {label} {memory_link(x['id'])} (win rate {x['win_rate']:.2f}, score {x['score']:.2f}): "
                        f"{esc(x['question'])}: {esc(x['summary'][:300])}"
                    )
            body = "\n".join(lines) or "No memories yet for this kind of question."
            m.append(_message(body, f"🧠 Memories: {len(event.successful)} successful, {len(event.failed)} failed", "done"))
        elif isinstance(event, PlanReady):
            title = "🗺️ Plan" if event.revision == 0 else f"🗺️ Supplementary plan (after reflection {event.revision})"
            body = "\n".join(f"{i}. {esc(s)}" for i, s in enumerate(event.steps, 1))
            if event.recovered:
                body += f"\n\n⚠️ Recovery: {esc(event.recovered)}"
            m.append(_message(body, title, "done"))
        elif isinstance(event, ExecutorThought):
            m.append(_message(esc(event.text), f"💭 Thought (turn {event.turn})", "done"))
        elif isinstance(event, ToolCalled):
            self._open_tool = _message(
                f"Arguments: {esc(_args_text(event.arguments))}", f"🔧 {esc(event.name)} (turn {event.turn})", "pending"
            )
            m.append(self._open_tool)
        elif isinstance(event, ToolReturned):
            entry = self._open_tool or _message("", f"🔧 {esc(event.name)} (turn {event.turn})")
            if self._open_tool is None:
                m.append(entry)
            result = _passages_markdown(event.passages) if event.ok else f"❌ {esc(event.error)}"
            entry["content"] += "\n\n" + result
            entry["metadata"]["status"] = "done"
            entry["metadata"]["duration"] = round(event.seconds, 2)
            self._open_tool = None
        elif isinstance(event, Recovery):
            m.append(_message(f"{esc(event.reason)} → {esc(event.action)}", f"⚠️ Recovery (turn {event.turn})", "done"))
        elif isinstance(event, ReflectionDecided):
            decision = "replan" if event.replan else "answer stands"
            m.append(_message(f"Decision: {decision}", f"🔁 Reflection {event.round}: {decision}", "done"))
        elif isinstance(event, AnswerReady):
            self.answer = event.text
            forced = f"\n\n_(answer forced: {esc(event.reason)})_" if event.forced else ""
            marks = "".join(f" [{s.get('n', i)}]" for i, s in enumerate(event.sources, 1))
            sources = ""
            if event.sources:
                items = []
                for i, s in enumerate(event.sources, 1):
                    url = safe_url(s.get("url"))
                    title = f"[{esc(s['title'])}]({url})" if url else f"**{esc(s['title'])}**"
                    sentence = f": “{esc(s['sentence'])}”" if s.get("sentence") else ""
                    items.append(f"{s.get('n', i)}. {title}{sentence}")
                sources = "\n\nSources:\n" + "\n".join(items)
            elif event.text:
                sources = "\n\n_No retrieved passage states this answer._"
            m.append({"role": "assistant", "content": f"**Answer:** {esc(event.text or '(no answer)')}{marks}{forced}{sources}"})
        elif isinstance(event, VerdictReady):
            self.verdict = event.label
            lines = [f"- {esc(f)}" for f in event.feedback]
            if event.evidence:
                lines.append(f"- evidence checked: {esc('; '.join(event.evidence))}")
            body = "\n".join(lines) or f"Method: {esc(event.method)}"
            m.append(_message(body, f"⚖️ Verdict: {event.label}, {esc(verdict_provenance(event))}", "done"))
        elif isinstance(event, MemoryStored):
            self.memory_id = event.memory_id
            label = "correct" if event.correct else "incorrect"
            m.append(
                _message(
                    f"{esc(event.summary)}\n\n(type: {esc(event.question_type)}, {esc(summary_origin(event.summary_source))})",
                    f"💾 Memory stored `{esc(event.memory_id[:8])}` ({label})",
                    "done",
                )
            )
        elif isinstance(event, RunFinished):
            m.append(_message(esc(_stats_text(event.stats)), "📊 Run summary", "done"))
        elif isinstance(event, RunFailed):
            m.append({"role": "assistant", "content": f"❌ {esc(event.message)}"})


def transcript_of(events: Iterable[Event]) -> ChatTranscript:
    transcript = ChatTranscript()
    for event in events:
        transcript.add(event)
    return transcript
