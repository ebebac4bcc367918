"""Plain text tables for the commands whose rows grow with the store (`farm leaderboard`, `farm aggregate`).

rich's Table renders every cell as a renderable: it measures, wraps and crops each one, a millisecond a row. At
10,000 runs `farm aggregate` printed its 17,700 rows in 19 s and 307 MB, and `farm leaderboard` spent 0.6 s of
its 0.95 s on 900 rows. This table keeps only the cells' strings, sizes each column from their display width
and writes the lines in one pass: the same heavy-head box as rich's default, a title centred above it. It never
wraps a cell: a long row runs past a narrow terminal rather than being cut.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Iterator, Sequence
from typing import Literal, TextIO

Justify = Literal["left", "right"]


def cell_width(text: str) -> int:
    """Columns `text` takes on a terminal: wide East Asian characters take two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text
    )


class TextTable:
    """Columns (name, justification), rows of strings, rendered as lines of text."""

    def __init__(self, columns: Sequence[tuple[str, Justify]], *, title: str | None = None) -> None:
        self.title = title
        self.names = [name for name, _ in columns]
        self.justify = [justify for _, justify in columns]
        self.rows: list[tuple[str, ...]] = []

    def add_row(self, *cells: str) -> None:
        if len(cells) != len(self.names):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.names)} columns")
        self.rows.append(cells)

    def lines(self) -> Iterator[str]:
        widths = [cell_width(name) for name in self.names]
        for row in self.rows:
            for index, cell in enumerate(row):
                width = cell_width(cell)
                if width > widths[index]:
                    widths[index] = width

        def line(cells: Sequence[str], edge: str, inner: str) -> str:
            parts = []
            for cell, width, justify in zip(cells, widths, self.justify, strict=True):
                pad = " " * (width - cell_width(cell))
                parts.append(f" {cell}{pad} " if justify == "left" else f" {pad}{cell} ")
            return edge + inner.join(parts) + edge

        def rule(left: str, fill: str, cross: str, right: str) -> str:
            return left + cross.join(fill * (width + 2) for width in widths) + right

        total = sum(widths) + 3 * len(widths) + 1
        if self.title:
            yield self.title.center(total).rstrip() if cell_width(self.title) < total else self.title
        yield rule("┏", "━", "┳", "┓")
        yield line(self.names, "┃", "┃")
        yield rule("┡", "━", "╇", "┩")
        for row in self.rows:
            yield line(row, "│", "│")
        yield rule("└", "─", "┴", "┘")

    def print(self, file: TextIO | None = None) -> None:
        out = file or sys.stdout
        out.writelines(text + "\n" for text in self.lines())
