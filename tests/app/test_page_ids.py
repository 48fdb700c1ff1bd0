"""Element ids are unique on the page: Gradio 6 draws a Group's elem_id on two nested elements (two
elements shared id="memory-detail"), so no Group in the app is given one; a Group is found by a class."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"


def groups_with_an_id() -> list[str]:
    found = []
    for path in sorted(APP.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Group"
                    and any(keyword.arg == "elem_id" for keyword in node.keywords)):
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_group_is_given_an_element_id():
    assert groups_with_an_id() == [], "use elem_classes for a gr.Group: its elem_id appears twice in the page"
