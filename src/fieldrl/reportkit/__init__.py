"""The report kit: what every page of a report is built from, the domains' own pages included.

Below the domains in fieldrl's layers (see ``.importlinter``): a domain's ``report.py`` imports
from here, never from the PDF assembler (:mod:`fieldrl.reports`), which sits above evaluation.

- :mod:`~fieldrl.reportkit.context`: :class:`ReportContext`, the run's numbers behind accessors
  (``ctx.stat(variant, policy, kpi)`` is an :class:`~fieldrl.results.Interval` or None; ``ctx.summary``
  is the run's :class:`~fieldrl.results.Summary`) and ``figure``/``para``;
- :mod:`~fieldrl.reportkit.numbers`: :func:`fmt`, :func:`with_range` and the minimum number of
  held-out cases for an interval;
- :mod:`~fieldrl.reportkit.layout`: the page (:data:`PAGE_WIDTH`), paragraph styles, table widths;
- :mod:`~fieldrl.reportkit.figures`: :func:`png_bytes`, the policy palette and the shared charts.

What ``summary.json`` holds, and the lookups on it, are :mod:`fieldrl.results`, below the kit.

Nothing is imported here: :mod:`~fieldrl.reportkit.numbers` is plain Python (and pydantic) that
``fieldrl list`` uses without loading reportlab, pandas or matplotlib.
"""
