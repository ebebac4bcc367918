"""farm.cli.tables: the plain text table of the commands whose rows grow with the store."""

from __future__ import annotations

import io

import pytest

from farm.cli.tables import TextTable, cell_width


def test_columns_fit_their_widest_cell_and_justify() -> None:
    table = TextTable((("model", "left"), ("tok/s", "right")), title="board")
    table.add_row("a", "1.5")
    table.add_row("longer-name", "1,234.5")
    assert list(table.lines()) == [
        "          board",
        "┏━━━━━━━━━━━━━┳━━━━━━━━━┓",
        "┃ model       ┃   tok/s ┃",
        "┡━━━━━━━━━━━━━╇━━━━━━━━━┩",
        "│ a           │     1.5 │",
        "│ longer-name │ 1,234.5 │",
        "└─────────────┴─────────┘",
    ]


def test_wide_and_combining_characters_keep_the_columns_aligned() -> None:
    assert cell_width("ab") == 2
    assert cell_width("模型") == 4  # East Asian wide: two columns each
    assert cell_width("e\u0301") == 1  # a combining accent takes none
    assert cell_width("4 × rtx") == 7
    table = TextTable((("name", "left"), ("n", "right")))
    table.add_row("模型", "1")
    table.add_row("model", "22")
    lines = list(table.lines())
    assert {cell_width(line) for line in lines} == {cell_width(lines[0])}
    assert lines[3] == "│ 模型  │  1 │"


def test_no_rows_is_a_header_and_a_bottom_rule() -> None:
    table = TextTable((("a", "left"),))
    out = io.StringIO()
    table.print(out)
    assert out.getvalue() == "┏━━━┓\n┃ a ┃\n┡━━━┩\n└───┘\n"


def test_a_row_of_the_wrong_length_is_refused() -> None:
    table = TextTable((("a", "left"), ("b", "left")))
    with pytest.raises(ValueError, match="a row of 1 cells in a table of 2 columns"):
        table.add_row("x")


def test_a_title_wider_than_the_table_is_printed_whole() -> None:
    table = TextTable((("a", "left"),), title="a title longer than the table")
    assert next(table.lines()) == "a title longer than the table"
