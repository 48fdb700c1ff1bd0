"""The `calculate` tool: arithmetic on the numbers and dates a comparison question turns on.

A small model subtracts years and compares amounts badly; this tool does it exactly. The expression
is parsed, never evaluated as Python: numbers, + - * / // % ** and parentheses, and ISO dates
(2001-09-11) whose difference is a number of days. Exponents and magnitudes are bounded so that no
expression costs more than a moment.
"""

from __future__ import annotations

import ast
import datetime as dt
import operator
import re

from backend.tools.base import BaseTool, Passage, ToolCapabilities, ToolError

MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 64
MAX_MAGNITUDE = 1e100
DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
OPERATORS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}


def _value(node: ast.AST, dates: list[dt.date]) -> float | int | dt.date:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and re.fullmatch(r"_date\d+", node.id):
        return dates[int(node.id[5:])]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _value(node.operand, dates)
        if isinstance(operand, dt.date):
            raise ToolError("a date cannot be negated; subtract two dates to get the days between them")
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = _value(node.left, dates), _value(node.right, dates)
        if isinstance(left, dt.date) or isinstance(right, dt.date):
            if isinstance(node.op, ast.Sub) and isinstance(left, dt.date) and isinstance(right, dt.date):
                return (left - right).days
            raise ToolError("dates can only be subtracted from each other (the result is in days)")
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolError(f"exponents above {MAX_EXPONENT} are not calculated")
        try:
            result = OPERATORS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ToolError("division by zero") from None
        if isinstance(result, complex) or abs(result) > MAX_MAGNITUDE:
            raise ToolError("the result is too large or not a real number")
        return result
    raise ToolError("only numbers, dates (YYYY-MM-DD), + - * / // % ** and parentheses are understood")


def calculate(expression: str) -> str:
    """The expression's value as text: an integer where it is one, else up to 6 decimals."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters; calculate in parts")
    dates: list[dt.date] = []

    def placeholder(match: re.Match) -> str:
        try:
            dates.append(dt.date(int(match[1]), int(match[2]), int(match[3])))
        except ValueError:
            raise ToolError(f"{match[0]} is not a date") from None
        return f"_date{len(dates) - 1}"

    text = DATE.sub(placeholder, expression.replace(",", "").replace("×", "*").replace("−", "-"))
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ToolError(f"could not read {expression!r} as arithmetic, e.g. 1987 - 1952 or 2001-09-11 - 1999-01-01") from None
    value = _value(tree.body, dates)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value) if isinstance(value, int) else f"{value:.6f}".rstrip("0").rstrip(".")


class CalculatorTool(BaseTool):
    name = "calculate"
    description = ("Calculate with numbers and dates the results gave you, e.g. 1987 - 1952, 3.5 * 12 or "
                   "2001-09-11 - 1999-01-01 (days between two dates). Arithmetic only, no search.")
    parameters = {
        "type": "object",
        "properties": {"expression": {"type": "string", "minLength": 1,
                                      "description": "numbers and YYYY-MM-DD dates with + - * / ( )"}},
        "required": ["expression"],
    }
    capabilities = ToolCapabilities(text_argument="expression")

    def run(self, arguments: dict) -> tuple[str, list[Passage]]:
        expression = arguments["expression"].strip()
        return f"{expression} = {calculate(expression)}", []
