"""The page's theme and the style every view shares.

Fonts: Gradio's default theme serves Source Sans Pro from its own static folder (no network), in
the weights 400 and 600; but the SemiBold (600) file Gradio ships holds 55 glyphs, "A" and "B" among
them and no other letter, so a semibold heading drew its "A" in Source Sans and every other letter in
a fallback font: the capital "A" looked small. The theme asks for the Regular and Bold files, which
hold every glyph; text asked for at 600 is drawn from the Bold face."""

from __future__ import annotations

import gradio as gr

SANS_WEIGHTS = (400, 700)  # the files of Gradio's Source Sans Pro that hold every glyph


def theme() -> gr.themes.Theme:
    """Gradio's default theme with its own local Source Sans Pro in complete weights, and IBM Plex Mono."""
    local, font = gr.themes.LocalFont, gr.themes.Font
    return gr.themes.Default(
        font=[local("Source Sans Pro", weights=SANS_WEIGHTS), font("ui-sans-serif"), font("system-ui"), font("sans-serif")],
        font_mono=[local("IBM Plex Mono", weights=(400, 700)), font("ui-monospace"), font("Consolas"), font("monospace")],
    )


PAGE_CSS = """
/* Tables wrap between words, never inside one: Gradio broke narrow headers ("modali|ty", "pinne|d") and a
   clicked cell anywhere. */
table td, table td *, table th, table th * {
  word-break: normal !important; overflow-wrap: normal !important; hyphens: none !important; }
"""
