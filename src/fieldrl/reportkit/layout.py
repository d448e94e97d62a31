"""Page geometry and table layout for the PDF: the page, the paragraph styles, images scaled to fit,
and columns wide enough that no header word is broken.

Every page of the report, the domains' own pages included, is A4 with 2 cm margins: figures and
tables are sized against :data:`PAGE_WIDTH`.

Reportlab wraps a cell's words at spaces and breaks a word that is wider than its column
("pe destrian"). Column widths here start from the widest word of each column (measured with
reportlab's ``stringWidth`` in the bold face, the wider one), and a table with more columns than
the page holds is split into several that repeat the first column.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Sequence
from typing import Any

from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, StyleSheet1, getSampleStyleSheet
from reportlab.lib.units import cm
from reportlab.lib.utils import ImageReader
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.platypus import Image

#: the page every report is laid out on
PAGE_SIZE = A4
#: left, right margin of every page
MARGIN = 2 * cm
#: the width between the margins: what figures and tables are scaled to
PAGE_WIDTH = A4[0] - 2 * MARGIN

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


def stylesheet() -> StyleSheet1:
    """reportlab's sample styles plus the report's own: Finding, Small, Cell, Verdict, Term."""
    styles = getSampleStyleSheet()
    styles.add(ParagraphStyle("Finding", parent=styles["BodyText"], fontSize=10.5, leading=14))
    styles.add(ParagraphStyle("Small", parent=styles["BodyText"], fontSize=8, leading=10))
    styles["Code"].fontSize, styles["Code"].leading = 6.5, 7.5
    styles.add(ParagraphStyle("Cell", parent=styles["BodyText"], fontSize=7.5, leading=9))
    styles.add(ParagraphStyle("Verdict", parent=styles["BodyText"], fontSize=11, leading=14, spaceAfter=3))
    styles.add(ParagraphStyle("Term", parent=styles["Small"], leftIndent=10, bulletIndent=2, spaceAfter=1))
    for name in ("Heading1", "Heading2", "Heading3"):
        styles[name].keepWithNext = 1  # a heading never ends a page without its first paragraph or table
    return styles


def image(png: bytes, width: float, max_height: float | None = None) -> Image:
    """``png`` as a flowable ``width`` wide (narrower where it would be taller than ``max_height``)."""
    w, h = ImageReader(io.BytesIO(png)).getSize()
    if max_height is not None and width * h / w > max_height:
        width = max_height * w / h
    return Image(io.BytesIO(png), width=width, height=width * h / w)


def text_table(rows: list[list[str]], styles: Any, widths: list[float]) -> Any:
    """Plain-text cells (escaped) in a gridded table, the first row a header repeated on every page."""
    from reportlab.lib import colors
    from reportlab.platypus import Paragraph, Table, TableStyle

    cell = styles["Cell"]
    data = [[Paragraph(html.escape(str(c), quote=False), cell) for c in row] for row in rows]
    table = Table(data, colWidths=widths, repeatRows=1)
    table.setStyle(
        TableStyle(
            [
                ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
                ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#e8eef5")),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
            ]
        )
    )
    return table
