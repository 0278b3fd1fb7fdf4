"""Benchmark tables and JSON: percentiles, cell formatting, column widths, the machine line."""

from __future__ import annotations

import json
import math
import os

import pytest

from omnivox.bench import table


def test_percentile_of_nothing_is_nan():
    assert math.isnan(table.percentile([], 50))


def test_percentile_interpolates_linearly():
    assert table.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert table.percentile([10.0], 95) == 10.0
    assert table.percentile([0.0, 10.0], 95) == pytest.approx(9.5)
    assert table.percentile([3.0, 1.0, 2.0], 0) == 1.0 and table.percentile([3.0, 1.0, 2.0], 100) == 3.0


def test_percentile_takes_ints_and_returns_a_float():
    value = table.percentile([1, 2, 3], 50)
    assert value == 2.0 and type(value) is float


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.23456, "1.235"),
        (0.0, "0.000"),
        (-3.5, "-3.500"),
        (99.9999, "100.000"),  # under 100 before rounding: three decimals
        (100.0, "100.0"),
        (12345.678, "12345.7"),
        (-250.04, "-250.0"),
        (7, "7"),
        ("yes", "yes"),
        (None, "None"),
        (True, "True"),
    ],
)
def test_cells_are_formatted_by_type_and_size(value, text, capsys):
    assert cell(value, capsys) == text


def test_nan_prints_as_nan(capsys):
    assert cell(float("nan"), capsys) == "nan"


def cell(value, capsys) -> str:
    """How ``print_table`` shows ``value`` in a one-cell table."""
    table.print_table("t", ["c"], [[value]])
    return capsys.readouterr().out.splitlines()[-1].strip("| ").strip()


def test_rss_of_this_process_and_of_none():
    assert table.rss_mb(os.getpid()) > 1
    assert math.isnan(table.rss_mb(2**31 - 1))  # no such process


def test_machine_names_the_cpu_count_and_python(monkeypatch):
    import os
    import platform

    text = table.machine()
    assert f"{os.cpu_count()} cores" in text
    assert f"Python {platform.python_version()}" in text and platform.system() in text


def _lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("|")]


def test_print_table_aligns_columns_to_the_widest_cell(capsys):
    table.print_table("T", ["name", "n"], [["a", 1.5], ["longer name", 12345.0]])
    out = capsys.readouterr().out
    assert out.startswith("\nT  (") and table.machine() in out
    header, rule, first, second = _lines(out)
    assert header == "| name        | n       |"
    assert rule == "|-------------|---------|"
    assert first == "|           a |   1.500 |"  # cells are right-aligned, headers left
    assert second == "| longer name | 12345.0 |"
    assert len({len(line) for line in (header, rule, first, second)}) == 1


def test_print_table_without_rows_prints_the_header(capsys):
    table.print_table("Empty", ["a", "bb"], [])
    header, rule = _lines(capsys.readouterr().out)
    assert header == "| a | bb |" and rule == "|---|----|"


def test_print_table_refuses_a_row_wider_than_its_columns(capsys):
    with pytest.raises(ValueError):
        table.print_table("T", ["a", "b"], [[1, 2, 3]])


def test_write_json_adds_the_machine(tmp_path):
    path = tmp_path / "out.json"
    table.write_json(str(path), {"bench": "x", "rows": [1, 2]})
    data = json.loads(path.read_text())
    assert data == {"machine": table.machine(), "bench": "x", "rows": [1, 2]}


def test_write_json_payload_may_override_nothing_it_does_not_name(tmp_path):
    path = tmp_path / "out.json"
    table.write_json(str(path), {"machine": "mine"})
    assert json.loads(path.read_text()) == {"machine": "mine"}  # the payload's own word wins


def test_write_json_without_a_path_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table.write_json(None, {"a": 1})
    table.write_json("", {"a": 1})
    assert list(tmp_path.iterdir()) == []
