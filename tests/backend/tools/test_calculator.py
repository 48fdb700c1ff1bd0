"""The calculate tool: exact arithmetic on numbers and dates, and nothing else."""

from __future__ import annotations

import pytest

from backend.tools.calculator import CalculatorTool


@pytest.mark.parametrize("expression, value", [
    ("1987 - 1952", "35"),
    ("3.5 * 12", "42"),
    ("(2,400,000 - 1,900,000) / 4", "125000"),
    ("10 / 4", "2.5"),
    ("2 ** 10 % 1000", "24"),
    ("2001-09-11 - 1999-01-01", "984"),
    ("-(3 - 5)", "2"),
])
def test_it_calculates_numbers_and_dates(expression, value):
    result = CalculatorTool()({"expression": expression})
    assert result.ok and result.content == f"{expression} = {value}" and result.passages == []


@pytest.mark.parametrize("expression, reason", [
    ("__import__('os').system('true')", "only numbers, dates"),
    ("(1).__class__", "only numbers, dates"),
    ("x + 1", "only numbers, dates"),
    ("9 ** 9 ** 9", "exponents above 64"),
    ("1e300 * 1e300", "too large"),
    ("1 / 0", "division by zero"),
    ("2001-02-30 - 2000-01-01", "is not a date"),
    ("2001-09-11 + 3", "dates can only be subtracted"),
    ("1 +", "could not read"),
    ("1" * 201, "longer than 200"),
])
def test_anything_else_is_a_failed_call_with_a_reason(expression, reason):
    result = CalculatorTool()({"expression": expression})
    assert not result.ok and reason in result.error


def test_a_missing_or_mistyped_expression_is_refused_with_an_example():
    result = CalculatorTool()({"expression": 1987})
    assert not result.ok and "Call it like this" in result.error
