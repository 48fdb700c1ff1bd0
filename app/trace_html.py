"""The trace of a run on the research page (#trace): one line per step, its details on expand; the
memories retrieved, each plan, hop, reflection, the verdict, the memory stored, the run's summary,
failures and notes."""

from __future__ import annotations

import json

from app.escaping import escape_html
from app.html_parts import label_html, link_href, memory_anchor, source_opener
from app.image_view import without_image_path
from app.report import query_text, source_label, stats_text, stored_words
from app.transcript import STOPPED_BY_USER, RunTranscript, StepView
from app.wording import STRATEGY_SHOWN, hop_outcome, one_line, person_plan_note, summary_origin, uses_phrase
from backend.events import AnswerReady, HopAnswered
from backend.prompts.manager import memory_shown
from backend.taught import near_note, recall_note

TOOL_ICONS = {"search": "🔍", "web_search": "🌐", "visit": "📄", "image_search": "🖼️"}


class TraceView(RunTranscript):
    """A run's trace, as HTML (trace_html)."""

    def trace_html(self) -> str:
        if not self.entries:
            return '<div class="trace empty">Memories, the plan, each step, the verdict and a run summary appear here.</div>'
        rows = [self._entry_html(kind, item, index) for index, (kind, item) in enumerate(self.entries)]
        return '<div class="trace">' + "".join(rows) + "</div>"

    def _key(self, *parts: object) -> str:
        return escape_html(":".join(str(p) for p in (self.run_id, *parts)))

    def _details(self, css: str, key: str, summary: str, body: str) -> str:
        return (f'<details class="entry {css}" data-key="{key}"><summary>{summary}</summary>'
                f'<div class="entry-body">{body}</div></details>')

    def _entry_html(self, kind: str, item, index: int) -> str:
        if kind == "step":
            return self._step_html(item)
        if kind == "memories":
            lines = []
            for label, items in (("successful strategy", item.successful), ("failure lesson", item.failed)):
                for x in items:
                    shown = (f"{STRATEGY_SHOWN}: {escape_html(x['strategy'])}" if x.get("strategy")
                             else f"as the Planner read it: {escape_html(memory_shown(x))}")
                    lines.append(f"<li>{label} {memory_anchor(x['id'])} ({escape_html(uses_phrase(x))}, score "
                                 f"{x['score']:.2f}), {shown}</li>")
            body = f"<ul>{''.join(lines)}</ul>" if lines else "<p>No memories yet for this kind of question.</p>"
            taught = f" · 🎓 {escape_html(recall_note(item.taught))}" if item.taught else ""
            if item.near_taught:
                body = f'<p class="near-taught">{escape_html(near_note(item.near_taught))}</p>' + body
            return self._details("memories", self._key("memories"),
                                 f"🧠 Memories: {len(item.successful)} successful, {len(item.failed)} failed{taught}", body)
        if kind == "plan":
            title = "🗺️ Plan" if item.revision == 0 else f"🗺️ Supplementary plan (after reflection {item.revision})"
            first = f": {escape_html(one_line(item.steps[0], 90))}" if item.steps else ""
            more = f" (+{len(item.steps) - 1} more)" if len(item.steps) > 1 else ""
            answered = {hop.number: hop for hop in self.run.hops} if item.revision == 0 else {}
            if answered:
                title = "🧩 Plan of sub-questions"
            if item.source == "person":
                title = title.replace("Plan", "Your plan", 1)
            body = "<ol>" + "".join(f"<li>{escape_html(s)}{self._hop_answer(answered.get(i))}</li>"
                                    for i, s in enumerate(item.steps, 1)) + "</ol>"
            if item.source == "person":
                body += f'<p class="muted">{escape_html(person_plan_note(item))}</p>'
            if item.recovered:
                body += f'<p class="recovery">⚠️ Recovery: {escape_html(item.recovered)}</p>'
            if item.planner_model:
                body += f'<p class="muted">written by {escape_html(item.planner_model)}</p>'
            if item.chosen:
                body += f'<p class="muted">chosen: {escape_html(item.chosen)}</p>'
            return self._details("plan", self._key("plan", item.revision),
                                 f"{title} · {len(item.steps)} step{'s' if len(item.steps) != 1 else ''}{first}{more}", body)
        if kind == "answer":
            return (f'<div class="entry answer">📝 Answer: {escape_html(item.text or "(no answer)")}'
                    f'{self._forced(item)}</div>')
        if kind == "hop":
            return (f'<div class="entry hop">🧩 Hop {escape_html(item.number)}: {escape_html(item.question)} → '
                    f'<b>{escape_html(item.answer or "(no answer)")}</b> '
                    f'<span class="muted">{escape_html(hop_outcome(item)[len(item.answer):].strip())}</span></div>')
        if kind == "reflection":
            decision = "replan" if item.replan else "the answer stands"
            return f'<div class="entry reflection">🔁 Reflection {item.round}: {decision}</div>'
        if kind == "verdict":
            lines = [f"<li>{escape_html(f)}</li>" for f in item.feedback]
            if item.evidence:
                lines.append(f"<li>evidence checked: {escape_html('; '.join(item.evidence))}</li>")
            body = f"<ul>{''.join(lines)}</ul>" if lines else f"<p>Method: {escape_html(item.method)}</p>"
            return self._details("verdict", self._key("verdict"), f"⚖️ Verdict: {label_html(self)}", body)
        if kind == "memory":
            label = stored_words(item, self.memory)
            body = (f"<p>{escape_html(item.summary)}</p><p class='muted'>type: {escape_html(item.question_type)}, "
                    f"{escape_html(summary_origin(item.summary_source))} · open {memory_anchor(item.memory_id)}</p>")
            return self._details("memory", self._key("memory"),
                                 f"💾 Memory stored {escape_html(item.memory_id[:8])} ({escape_html(label)})", body)
        if kind == "summary":
            stopped = " (stopped by the user)" if item.stopped else ""
            return f'<div class="entry run-summary">📊 Run summary{stopped}: {escape_html(stats_text(item.stats))}</div>'
        if kind == "failure":
            return f'<div class="entry failure">❌ {escape_html(item.message)}</div>'
        if kind == "note":
            icon, text = item
            return f'<div class="entry note">{escape_html(icon)} {escape_html(text)}</div>'
        return ""

    @staticmethod
    def _hop_answer(hop: HopAnswered | None) -> str:
        """' → answer (the page that states it)' for a sub-question of the plan, once it is researched."""
        if hop is None:
            return ""
        source = hop.sentence.partition(": ")[0] if hop.sentence else "no retrieved sentence states it"
        return f' → <b>{escape_html(hop.answer or "(no answer)")}</b> <span class="muted">({escape_html(source)})</span>'

    @staticmethod
    def _forced(answer: AnswerReady) -> str:
        return f' <span class="muted">(forced: {escape_html(answer.reason)})</span>' if answer.forced else ""

    def _step_html(self, step: StepView) -> str:
        parts = []
        seconds = 0.0
        for called, returned in step.calls:
            icon = TOOL_ICONS.get(called.name, "🔧")
            asked = query_text(self._shown_arguments(called.arguments), 140)
            if returned is None:
                result = "searching…" if called.name.endswith("search") else "running…"
            elif not returned.ok:
                result = f"❌ {one_line(returned.error or 'error', 120)}"
            else:
                titles = [p.get("title", "") for p in returned.passages]
                shown = " · ".join(one_line(t, 50) for t in titles[:3])
                extra = f" (+{len(titles) - 3} more)" if len(titles) > 3 else ""
                result = (f"{len(titles)} passage{'s' if len(titles) != 1 else ''}: {shown}{extra}" if titles
                          else "no passages")
                seconds += returned.seconds
            parts.append(f"{icon} {escape_html(called.name)} {escape_html(asked)} → {escape_html(result)}")
        for answer in step.answers:
            verb = "answered" if not answer.forced else ("answer so far" if answer.reason == STOPPED_BY_USER
                                                         else "answer forced")
            parts.append(f"✅ {verb} “{escape_html(one_line(answer.text or '(no answer)', 120))}”")
        if not parts:
            if step.draft:
                parts.append("✍️ writing…")
            elif step.thoughts:
                parts.append(f"💭 {escape_html(one_line(step.thoughts[-1], 120))}")
            elif step.recoveries:
                last = step.recoveries[-1]
                parts.append(f"{'🧭' if last.routine else '⚠️'} {escape_html(one_line(last.reason, 120))}")
            else:
                parts.append("…")
        badges = ""
        n = step.repairs
        if n:
            badges += f'<span class="badge recovery-badge">⚠️ {n} recover{"ies" if n != 1 else "y"}</span>'
        if seconds >= 0.05:
            badges += f'<span class="badge time-badge">{seconds:.1f} s</span>'
        summary = f'<span class="step-n">Step {step.turn}</span> ' + " · ".join(parts) + badges
        return self._details("step", self._key("step", step.turn), summary, self._step_body(step))

    def _step_body(self, step: StepView) -> str:
        body = []
        for thought in step.thoughts:
            body.append(f'<p class="thought">💭 <b>Thought:</b> {escape_html(thought)}</p>')
        for r in step.recoveries:
            if r.routine:
                body.append(f'<p class="guided muted">🧭 Guided: {escape_html(r.reason)} → {escape_html(r.action)}</p>')
            else:
                body.append(f'<p class="recovery">⚠️ <b>Recovery:</b> {escape_html(r.reason)} → '
                            f'{escape_html(r.action)}</p>')
        for called, returned in step.calls:
            body.append(f'<p class="call">🔧 <b>{escape_html(called.name)}</b> arguments: '
                        f'<code>{escape_html(json.dumps(self._shown_arguments(called.arguments), ensure_ascii=False))}</code></p>')
            if returned is None:
                continue
            if not returned.ok:
                body.append(f'<p class="tool-error">❌ {escape_html(returned.error)}</p>')
                continue
            if not returned.passages:
                body.append('<p class="muted">(no passages)</p>')
            for p in returned.passages:
                link = link_href(p.get("url"))
                opener = source_opener(p.get("url"))
                anchor = (f' · <a href="{link}" target="_blank" rel="noopener noreferrer">link</a>' if link
                          else f" · {opener}" if opener else "")
                body.append(f'<div class="passage"><div class="passage-meta"><b>{escape_html(p.get("title", ""))}</b> · '
                            f'{escape_html(source_label(p))}{anchor}</div>'
                            f'<div class="passage-text">{escape_html(p.get("text") or "")}</div></div>')
            body.append(f'<p class="muted">{returned.seconds:.2f} s</p>')
        for answer in step.answers:
            body.append(f'<p class="answer">📝 <b>Answer:</b> {escape_html(answer.text or "(no answer)")}'
                        f'{self._forced(answer)}</p>')
        if step.draft:
            body.append(f'<pre class="draft">{escape_html(step.draft)}</pre>')
        return "".join(body) or '<p class="muted">(nothing yet)</p>'

    def _shown_arguments(self, arguments: dict) -> dict:
        """A tool call's arguments with the uploaded image's path replaced by its file's name."""
        return without_image_path(arguments, self.started.image if self.started is not None else None)
