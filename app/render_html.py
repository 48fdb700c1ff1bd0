"""The research page's HTML of a run: the answer first, in a box (app.research_tab's #answer-box),
and below it the trace (#trace): one line per step, its details on expand; with the script and the
style both share. Everything from a model, a page, a document or a memory goes through escape_html
before it reaches the browser."""

from __future__ import annotations

import json
import re
from typing import Iterable

from app.escaping import escape_html
from app.image_view import (
    IMAGE_GONE, NO_OCR_TEXT, OCR_LABEL, image_label, image_seen, thumbnail_data_uri, without_image_path,
)
from app.report import stored_words
from app.report import cited_passage, document_place, query_text, source_label, stats_text, web_link
from app.transcript import STOPPED_BY_USER, RunLimits, RunTranscript, StepView
from app.answer_glance import also_read, best_so_far, is_not_of_kind, stating_sentence, with_unit
from backend.labels import feedback_words, verdict_words
from app.wording import (STRATEGY_SHOWN, hop_outcome, one_line, person_plan_note, summary_origin, uses_phrase,
                         verdict_provenance)
from backend.events import AnswerReady, Event, HopAnswered
from backend.replay import replay
from backend.prompts.manager import memory_shown
from backend.taught import answer_note, near_note, recall_note

TOOL_ICONS = {"search": "🔍", "web_search": "🌐", "visit": "📄", "image_search": "🖼️"}
STATE_LABELS = {"idle": "", "working": "working…", "final": "final", "stopped": "stopped", "failed": "failed",
                "unfinished": "unfinished"}
INTERRUPTED_NOTE = ("The run was interrupted before it finished (the app stopped while it ran): this is the answer "
                    "so far, not judged, and no memory was stored. Ask the question again for a full run.")
ANSWER_PLACEHOLDER = "Ask a question: the answer appears here first, with numbered sources that open the passage they cite."

_MEMORY_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")


def _href(url: str | None) -> str | None:
    """An http(s) URL escaped for an href attribute, or None (doc:// locators are not links)."""
    link = web_link(url)
    return escape_html(link) if link else None


def source_opener(url: str | None) -> str:
    """For a passage of the person's own documents (a doc:// locator), a button that opens it: the
    page asks the server (research_tab's `open_source` event), which reads it from the caller's own
    namespace or the shared collections; '' for anything else."""
    if document_place(url) is None:
        return ""
    return (f'<button type="button" class="doc-open" data-doc="{escape_html(url)}" title="{escape_html(url)}">'
            f'📄 open the passage in your documents</button>')


def memory_anchor(memory_id: str) -> str:
    """A link that opens the memory in the Memory view (a new page at ?memory=ID)."""
    if not _MEMORY_ID.match(memory_id):
        return f"<code>{escape_html(memory_id[:8])}</code>"
    return f'<a href="?memory={memory_id}" target="_blank" rel="noopener"><code>{memory_id[:8]}</code></a>'


class TranscriptPage(RunTranscript):
    """A run's transcript as the research page shows it: the answer box and the trace, as HTML."""

    # -- the answer box ---------------------------------------------------------------------------
    def _cite_key(self, n: object) -> str:
        return f"{self.run_id}:cite:{n}"

    def answer_html(self, limits: RunLimits | None = None, now: float | None = None) -> str:
        state = self.state
        if state == "idle":
            return (f'<div class="answer-box idle" data-state="idle">'
                    f'<p class="answer-placeholder">{escape_html(ANSWER_PLACEHOLDER)}</p></div>')
        parts = [f'<div class="answer-box {state}" data-state="{state}">',
                 f'<div class="answer-head">'
                 f'<span class="answer-badge badge-{state}">{escape_html(STATE_LABELS[state])}</span>']
        eta = self.eta_text(limits, now)
        if eta:
            parts.append(f'<span class="answer-eta">{escape_html(eta)}</span>')
        parts.append("</div>")
        if self.started is not None:
            parts.append(self._thread_html())
            parts.append(f'<div class="answer-question">{escape_html(self.started.question)}</div>')
            parts.append(self._follow_up_html())
            parts.append(self._image_html())
        latest = self.answers[-1] if self.answers else None
        if latest is not None and latest.text:
            marks = "".join(
                f'<button type="button" class="cite" data-cite="{escape_html(self._cite_key(c.get("n", i)))}" '
                f'title="{escape_html(c.get("title", ""))}">[{escape_html(c.get("n", i))}]</button>'
                for i, c in enumerate(latest.sources, 1))
            parts.append(self._answer_line_html(latest, marks))
        elif state == "working":
            parts.append(f'<div class="answer-text pending">{escape_html(self._phase())}</div>')
            so_far = best_so_far(self.events)
            if so_far is not None:
                parts.append(f'<div class="answer-so-far">So far: <b>{escape_html(so_far[0])}</b> '
                             f'<span class="muted">({escape_html(so_far[1])})</span></div>')
        elif state == "stopped":
            parts.append('<div class="answer-text pending">Stopped before any answer was found.</div>')
        elif state == "final":
            parts.append('<div class="answer-text pending">(no answer)</div>')
        elif state == "unfinished":
            parts.append('<div class="answer-text pending">Interrupted before any answer was found.</div>')
        parts += self._answer_notes(state, latest)
        if latest is not None and latest.sources:
            parts.append('<ol class="citations">')
            for i, citation in enumerate(latest.sources, 1):
                parts.append(self._citation_html(citation, i))
            parts.append("</ol>")
        elif latest is not None and latest.text and state != "working":
            parts.append('<p class="answer-note">No retrieved passage states this answer.</p>')
        also = also_read(latest) if latest is not None else []
        if also:
            parts.append(f'<p class="also-read muted">Also read: {escape_html(" · ".join(also))}</p>')
        parts.append("</div>")
        return "".join(parts)

    def _answer_line_html(self, latest: AnswerReady, marks: str) -> str:
        """The answer at a glance: the span with its unit and, beside it, the sentence that states it; an
        answer of another kind than the question asks for, marked as not being the answer."""
        if is_not_of_kind(latest):
            return (f'<div class="answer-text not-of-kind" data-kind="not-asked">⚠️ {escape_html(latest.text)}</div>'
                    '<p class="answer-note not-of-kind-note">No answer of the kind the question asks for was found: '
                    'this says what was found instead.</p>')
        sentence = stating_sentence(latest)
        question = self.started.question if self.started is not None else ""
        beside = f'<div class="answer-sentence">“{escape_html(sentence)}”</div>' if sentence else ""
        return (f'<div class="answer-line"><div class="answer-text">{escape_html(with_unit(latest.text, sentence, question))}'
                f'<span class="cite-marks">{marks}</span></div>{beside}</div>')

    def _thread_html(self) -> str:
        """A follow-up's thread: the earlier questions, as asked, with their answers; '' for a question of its own."""
        if not self.earlier:
            return ""
        items = []
        for events in self.earlier:
            run = replay(events)
            asked = (run.started.follow_up or {}).get("asked") if run.started is not None else None
            items.append(f'<li><span class="thread-question">{escape_html(asked or run.question)}</span> → '
                         f'<b>{escape_html(run.answer or "(no answer)")}</b></li>')
        return f'<div class="thread"><div class="thread-label">Earlier in this thread</div><ol>{"".join(items)}</ol></div>'

    def _follow_up_html(self) -> str:
        """How a follow-up was read with its thread: as typed, and the standalone question researched."""
        follow_up = self.started.follow_up if self.started is not None else None
        if not follow_up:
            return ""
        reused = len(follow_up.get("reused") or [])
        kept = (f" {reused} passage{'s' if reused != 1 else ''} the thread found before were in view."
                if reused else "")
        return (f'<div class="follow-up-read">↪ Follow-up: you asked “{escape_html(follow_up.get("asked") or "")}”, '
                f'researched as “<span class="rewritten">{escape_html(self.started.question)}</span>”. '
                f'<span class="muted">{escape_html(follow_up.get("how") or "")}{escape_html(kept)}</span></div>')

    def _image_html(self) -> str:
        """What the run saw of the question's image: a thumbnail, its name, the caption with its
        source in words, and the text OCR read in it; '' for a question without an image."""
        seen = image_seen(self.started)
        if seen is None:
            return ""
        thumb = thumbnail_data_uri(seen.path)
        picture = (f'<img class="image-thumb" src="{escape_html(thumb)}" alt="{escape_html(image_label(seen.path))}">'
                   if thumb else f'<div class="image-thumb missing">{escape_html(IMAGE_GONE)}</div>')
        if seen.ocr_text:
            ocr = (f'<div class="image-ocr-label">{escape_html(OCR_LABEL)}:</div>'
                   f'<div class="image-ocr">{escape_html(seen.ocr_text)}</div>')
        else:
            ocr = f'<div class="image-ocr-label muted">{escape_html(NO_OCR_TEXT)}</div>'
        return (f'<div class="answer-image">{picture}<div class="image-facts">'
                f'<div class="image-name">🖼️ Your image: <code>{escape_html(seen.name)}</code></div>'
                f'<div class="image-caption">🏷️ {escape_html(seen.caption_sentence)}</div>{ocr}</div></div>')

    def _shown_arguments(self, arguments: dict) -> dict:
        """A tool call's arguments with the uploaded image's path replaced by its file's name."""
        return without_image_path(arguments, self.started.image if self.started is not None else None)

    def _phase(self) -> str:
        if self.reflections and self.entries and self.entries[-1][0] == "reflection":
            return "Reflecting on the research…"
        if self.steps:
            step = max(self.steps)
            return f"Researching: step {step}…"
        if self.plans:
            return "Researching: the plan is ready, the first step is under way…"
        return "Planning the research…"

    def _answer_notes(self, state: str, latest: AnswerReady | None) -> list[str]:
        notes = []
        if state == "working" and latest is not None and latest.text:
            notes.append("A first answer: the Planner's reflection may still revise it.")
        if latest is not None and latest.forced and latest.reason != STOPPED_BY_USER:
            notes.append(f"Answer forced: {latest.reason}.")
        if state == "stopped":
            notes.append("You stopped the run: this is the answer so far. It was not judged and no memory was stored.")
        if latest is not None and latest.taught:
            notes.append(answer_note(latest.taught))
        if state == "unfinished":
            notes.append(INTERRUPTED_NOTE)
        out = [f'<p class="answer-note">{escape_html(n)}</p>' for n in notes]
        if state == "failed" and self.failure is not None:
            out.append(f'<p class="answer-error">❌ {escape_html(self.failure.message)}</p>')
        if self.verdict is not None and state in ("final", "working"):
            out.append(f'<p class="answer-verdict">⚖️ Verdict: {self._label_html()}</p>')
        if self.feedback is not None:
            correction = (f"; the right answer, as you typed it: <b>{escape_html(self.feedback.right_answer)}</b>"
                          if self.feedback.right_answer else "")
            out.append(f'<p class="answer-verdict feedback">👤 Your feedback: '
                       f'<b>{escape_html(feedback_words(self.feedback))}</b>{correction}</p>')
        return out

    def _label_html(self) -> str:
        """The run's label (RunTranscript.label, the words every view shows) and how the verdict was reached;
        where a person's word or their memory's label has replaced the verdict, what the verdict said."""
        label, judged = self.label, verdict_words(self.verdict)
        detail = verdict_provenance(self.verdict) if label == judged else f"the run's own verdict was {judged}"
        return f'<b class="run-label">{escape_html(label)}</b>, {escape_html(detail)}'

    def _citation_html(self, citation: dict, i: int) -> str:
        n = citation.get("n", i)
        passage = cited_passage(citation, self.passages)
        where = source_label(citation)
        link = _href(citation.get("url"))
        sentence = f' — “{escape_html(citation["sentence"])}”' if citation.get("sentence") else ""
        body = (f'<div class="passage-text">{escape_html(passage.get("text"))}</div>'
                if passage is not None and passage.get("text")
                else '<div class="passage-text missing">The passage\'s text is not in this run\'s events.</div>')
        meta = [escape_html(where)]
        opener = source_opener(citation.get("url"))
        if link:
            meta.append(f'<a href="{link}" target="_blank" rel="noopener noreferrer">{link}</a>')
        elif opener:
            meta.append(opener)
        elif citation.get("url"):
            meta.append(f'<span class="locator">{escape_html(citation.get("url"))}</span>')
        return (f'<li><details class="citation" data-key="{escape_html(self._cite_key(n))}">'
                f'<summary><span class="cite-n">[{escape_html(n)}]</span> '
                f'<b>{escape_html(citation.get("title") or "(untitled)")}</b>'
                f'<span class="cite-where"> · {escape_html(where)}</span>{sentence}</summary>'
                f'<div class="passage"><div class="passage-meta">{" · ".join(meta)}</div>{body}</div></details></li>')

    # -- the trace --------------------------------------------------------------------------------
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
            return self._details("verdict", self._key("verdict"), f"⚖️ Verdict: {self._label_html()}", body)
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
                link = _href(p.get("url"))
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


def transcript_of(events: Iterable[Event]) -> TranscriptPage:
    transcript = TranscriptPage()
    for event in events:
        transcript.add(event)
    return transcript


# Keeps what people opened open while the run streams (Gradio replaces the HTML on each update and
# drops the `open` attributes it did not send), makes a citation mark open its passage and asks the
# server for its source beside the answer (the `open_citation` event, with the citation's key; a
# document button inside a citation does the same), and asks for a trace line's document passage (the
# `open_source` event, with its doc:// locator).
KEEP_OPEN_JS = """
const opened = new Set();
const keyOf = (d) => d.getAttribute('data-key');
element.addEventListener('click', (event) => {
  const doc = event.target.closest('[data-doc]');
  if (doc && element.contains(doc)) {
    event.preventDefault();
    const cited = doc.closest('details.citation[data-key]');
    if (cited) trigger('open_citation', {key: keyOf(cited)});
    else trigger('open_source', {locator: doc.getAttribute('data-doc')});
    return;
  }
  const mark = event.target.closest('[data-cite]');
  if (mark && element.contains(mark)) {
    event.preventDefault();
    const key = mark.getAttribute('data-cite');
    const panel = Array.from(element.querySelectorAll('details[data-key]')).find((d) => keyOf(d) === key);
    if (panel) {
      opened.add(key);
      panel.open = true;
      panel.classList.add('flash');
      setTimeout(() => panel.classList.remove('flash'), 1500);
      panel.scrollIntoView({block: 'nearest'});
    }
    trigger('open_citation', {key: key});
    return;
  }
  const summary = event.target.closest('summary');
  const details = summary && summary.parentElement;
  if (details && details.matches('details[data-key]') && element.contains(details)) {
    if (details.open) opened.delete(keyOf(details)); else opened.add(keyOf(details));
  }
});
new MutationObserver(() => {
  for (const d of element.querySelectorAll('details[data-key]')) {
    if (!d.open && opened.has(keyOf(d))) d.open = true;
  }
}).observe(element, {childList: true, subtree: true, attributes: true, attributeFilter: ['open']});
"""

RESEARCH_CSS = """
.answer-box { border: 2px solid var(--border-color-primary); border-radius: 10px; padding: 12px 16px; }
.answer-box.working { border-color: var(--color-accent); }
.answer-box.final { border-color: #2e9d55; }
.answer-box.stopped { border-color: #c98a12; }
.answer-box.failed { border-color: #c23b3b; }
.answer-box.unfinished { border-color: #c98a12; }
.answer-head { display: flex; gap: 12px; align-items: baseline; flex-wrap: wrap; }
.answer-badge { font-weight: 600; font-size: 0.85em; padding: 1px 8px; border-radius: 999px; background: var(--background-fill-secondary); }
.badge-working { color: var(--color-accent); }
.badge-final { color: #2e9d55; }
.badge-stopped { color: #c98a12; }
.badge-failed { color: #c23b3b; }
.badge-unfinished { color: #c98a12; }
.answer-eta { font-size: 0.85em; color: var(--body-text-color-subdued); }
.answer-question { margin-top: 6px; color: var(--body-text-color-subdued); }
.answer-text { font-size: 1.35em; font-weight: 600; margin: 6px 0; overflow-wrap: anywhere; }
.answer-text.pending { font-weight: 400; font-size: 1.05em; color: var(--body-text-color-subdued); }
.answer-line { display: flex; gap: 6px 16px; align-items: baseline; flex-wrap: wrap; }
.answer-sentence { color: var(--body-text-color-subdued); font-style: italic; flex: 1 1 20em; min-width: 0; }
.answer-text.not-of-kind { color: #c98a12; }
.answer-so-far { margin: 4px 0; }
.doc-open { border: none; background: none; padding: 0; color: var(--link-text-color); cursor: pointer; text-decoration: underline; font-size: inherit; }
.cite { font-size: 0.7em; vertical-align: super; margin-left: 2px; padding: 0 2px; border: none; background: none; color: var(--link-text-color); cursor: pointer; }
.answer-note, .answer-verdict, .answer-error { margin: 4px 0; }
.answer-error { color: #c23b3b; }
.citations { margin: 6px 0 0 0; padding-left: 0; list-style: none; }
.citation summary, .entry summary { cursor: pointer; }
.citation.flash { outline: 2px solid var(--color-accent); border-radius: 6px; }
.passage { margin: 4px 0 8px 18px; padding: 6px 10px; border-left: 3px solid var(--border-color-primary); }
.passage-meta { font-size: 0.85em; color: var(--body-text-color-subdued); overflow-wrap: anywhere; }
.passage-text { white-space: pre-wrap; overflow-wrap: anywhere; }
.trace { display: flex; flex-direction: column; gap: 2px; }
.trace.empty { color: var(--body-text-color-subdued); }
.entry { padding: 3px 6px; border-radius: 6px; overflow-wrap: anywhere; }
.entry:hover { background: var(--background-fill-secondary); }
.entry-body { padding: 4px 0 6px 18px; }
.step-n { font-weight: 600; }
.badge { margin-left: 8px; font-size: 0.8em; padding: 0 6px; border-radius: 999px; background: var(--background-fill-secondary); }
.muted { color: var(--body-text-color-subdued); font-size: 0.9em; }
.draft { white-space: pre-wrap; font-size: 0.85em; }
.entry.failure { color: #c23b3b; }
.answer-image { display: flex; gap: 12px; align-items: flex-start; margin: 8px 0; }
.image-thumb { max-width: 192px; max-height: 192px; border-radius: 6px; border: 1px solid var(--border-color-primary); flex: none; }
.image-thumb.missing { width: 120px; padding: 8px; font-size: 0.85em; color: var(--body-text-color-subdued); }
.image-facts { display: flex; flex-direction: column; gap: 2px; min-width: 0; }
.image-ocr-label { font-size: 0.9em; margin-top: 4px; }
.thread { margin-top: 6px; font-size: 0.9em; color: var(--body-text-color-subdued); }
.thread ol { margin: 2px 0 0 0; padding-left: 20px; }
.follow-up-read { margin-top: 4px; font-size: 0.9em; }
.image-ocr { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 12em; overflow-y: auto; padding: 4px 8px; border-left: 3px solid var(--border-color-primary); font-family: var(--font-mono); font-size: 0.9em; }
"""
