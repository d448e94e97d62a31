"""Table geometry for the PDF: columns wide enough that no header word is broken.

Reportlab wraps a cell's words at spaces and breaks a word that is wider than its column
("pe destrian"). Column widths here start from the widest word of each column (measured with
reportlab's ``stringWidth`` in the bold face, the wider one), and a table with more columns than
the page holds is split into several that repeat the first column.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from reportlab.pdfbase.pdfmetrics import stringWidth

#: left and right padding of every cell in fieldrl's tables (points)
CELL_PADDING = 3.0
#: the face words are measured in: bold is wider than regular and italic
MEASURE_FONT = "Helvetica-Bold"

_TAG = re.compile(r"<[^>]+>")


def words(markup: str) -> list[str]:
    """The words of a reportlab paragraph's markup (tags and entities removed)."""
    return html.unescape(_TAG.sub(" ", markup)).split()


def word_width(word: str, size: float) -> float:
    return stringWidth(word, MEASURE_FONT, size)


def min_column_width(cells: Sequence[str], size: float) -> float:
    """Narrowest width (padding included) that fits every word of ``cells`` unbroken."""
    widest = max((word_width(w, size) for c in cells for w in words(c)), default=0.0)
    return widest + 2 * CELL_PADDING + 0.5


def column_groups(widths: Sequence[float], available: float) -> list[list[int]]:
    """Indices of ``widths`` in as few groups as fit ``available``, about as many columns in each."""

    def groups(most: int) -> list[list[int]]:
        out: list[list[int]] = []
        used = 0.0
        for i, w in enumerate(widths):
            if not out or used + w > available or len(out[-1]) >= most:
                out.append([])
                used = 0.0
            out[-1].append(i)
            used += w
        return out

    greedy = groups(len(widths))
    even = groups(-(-len(widths) // len(greedy))) if greedy else greedy
    return even if len(even) == len(greedy) else greedy


def spread(minimum: Sequence[float], available: float) -> list[float]:
    """Widths of at least ``minimum`` each that add up to ``available`` (the slack shared equally)."""
    slack = max(0.0, available - sum(minimum)) / max(1, len(minimum))
    return [m + slack for m in minimum]


def header_overflows(table: Any) -> list[str]:
    """Words of a table's header row wider than their column: each would be broken across lines.

    Works on any reportlab ``Table`` whose header cells are ``Paragraph`` objects (or strings).
    """
    header = table._cellvalues[0]
    widths = table._colWidths
    found = []
    for col, (cell, width) in enumerate(zip(header, widths, strict=True)):
        style = table._cellStyles[0][col]
        room = width - style.leftPadding - style.rightPadding
        text = getattr(cell, "text", cell)
        size = getattr(getattr(cell, "style", None), "fontSize", style.fontsize)
        found += [w for w in words(str(text)) if word_width(w, size) > room]
    return found
