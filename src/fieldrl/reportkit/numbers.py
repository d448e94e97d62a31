"""How the report states a number: an estimate with its interval, three significant digits, "n/a".

An estimate is a :class:`fieldrl.results.Interval` of the run's summary (a mean or IQM with its
confidence interval; ``low`` and ``high`` are NaN where there are too few held-out cases for one), read
through :class:`~fieldrl.reportkit.context.ReportContext` or the summary's own lookups; the functions
below turn it into text.
"""

from __future__ import annotations

import math
from typing import Any

from fieldrl.results import Interval

#: fewest held-out cases (evaluation seeds) for a confidence interval or a "beat it n % of the time":
#: below it a bootstrap over cases says nothing, so the report says "too few held-out cases to compare"
MIN_CASES = 5


def finite(value: Any) -> bool:
    """A number that is not None, NaN or infinite."""
    return value is not None and math.isfinite(value)


def fmt(value: float) -> str:
    """Three significant digits, without scientific notation for the tiny values KPIs produce."""
    if value != value:  # NaN
        return "n/a"
    if value == 0 or abs(value) >= 0.01:
        text = f"{value:,.3g}"
        return text if abs(value) < 1000 and "e" not in text else f"{value:,.0f}"  # 999.6: not "1e+03"
    return "≈0"


def fmt_cell(value: float) -> str:
    """:func:`fmt` for a table cell: trailing zeros kept, so a column reads at one precision
    (``81.0`` above ``83.9``, not ``81``). Prose keeps :func:`fmt` ("6 percentage points")."""
    text = fmt(value)
    if not math.isfinite(value) or value == 0 or abs(value) < 0.01 or abs(value) >= 1000:
        return text
    padded = f"{float(value):#,.3g}"
    return text if "e" in padded else padded.rstrip(".")


def with_range(stat: Interval, unit: str = "") -> str:
    """``12.3 % [10.1, 14.5]``, or ``12.3 %`` where there is no interval (too few held-out cases)."""
    if not stat.has_range:
        return f"{fmt(stat.value)}{unit}"
    return f"{fmt(stat.value)}{unit} [{fmt(stat.low)}, {fmt(stat.high)}]"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 case``, ``2 cases``; ``many`` for irregular plurals (``policy`` -> ``policies``)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def join_words(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def pct(value: float) -> str:
    """A signed percentage: ``+12 %``, ``-3.4 %``."""
    return f"{value:+.0f} %" if abs(value) >= 10 else f"{value:+.2g} %"


def too_few(n: int) -> str:
    return f"too few held-out cases to compare ({n}; a confidence interval needs at least {MIN_CASES})"
