"""The script and the style the research page's answer box and trace share (gr.HTML's js_on_load and
css_template on #answer-box and #trace)."""

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
