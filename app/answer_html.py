"""The answer box of a run on the research page (#answer-box): its state, the question (with a
follow-up's thread and the image the run saw), the answer at a glance with its citation marks, the
notes and verdict beneath it, and each citation with its passage."""

from __future__ import annotations

from app.answer_glance import also_read, best_so_far, is_not_of_kind, stating_sentence, with_unit
from app.escaping import escape_html
from app.html_parts import label_html, link_href, source_opener
from app.image_view import IMAGE_GONE, NO_OCR_TEXT, OCR_LABEL, image_label, image_seen, thumbnail_data_uri
from app.report import cited_passage, source_label
from app.transcript import STOPPED_BY_USER, RunLimits, RunTranscript
from backend.events import AnswerReady
from backend.labels import feedback_words
from backend.replay import replay
from backend.taught import answer_note

STATE_LABELS = {"idle": "", "working": "working…", "final": "final", "stopped": "stopped", "failed": "failed",
                "unfinished": "unfinished"}
INTERRUPTED_NOTE = ("The run was interrupted before it finished (the app stopped while it ran): this is the answer "
                    "so far, not judged, and no memory was stored. Ask the question again for a full run.")
ANSWER_PLACEHOLDER = "Ask a question: the answer appears here first, with numbered sources that open the passage they cite."


class AnswerBox(RunTranscript):
    """A run's answer box, as HTML (answer_html)."""

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
            out.append(f'<p class="answer-verdict">⚖️ Verdict: {label_html(self)}</p>')
        if self.feedback is not None:
            correction = (f"; the right answer, as you typed it: <b>{escape_html(self.feedback.right_answer)}</b>"
                          if self.feedback.right_answer else "")
            out.append(f'<p class="answer-verdict feedback">👤 Your feedback: '
                       f'<b>{escape_html(feedback_words(self.feedback))}</b>{correction}</p>')
        return out

    def _citation_html(self, citation: dict, i: int) -> str:
        n = citation.get("n", i)
        passage = cited_passage(citation, self.passages)
        where = source_label(citation)
        link = link_href(citation.get("url"))
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
