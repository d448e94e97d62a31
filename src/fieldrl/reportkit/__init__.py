"""The report kit: what every page of a report is built from, the domains' own pages included.

Below the domains in fieldrl's layers (see ``.importlinter``): a domain's ``report.py`` imports
from here, never from the PDF assembler (:mod:`fieldrl.reports`), which sits above evaluation.

- :mod:`~fieldrl.reportkit.context`: :class:`ReportContext`, the run's numbers behind accessors
  (``ctx.stat(variant, policy, kpi)`` is an :class:`Interval` or None) and ``figure``/``para``;
- :mod:`~fieldrl.reportkit.numbers`: :class:`Interval`, :class:`Comparison`, :func:`fmt`,
  :func:`with_range` and the minimum number of held-out cases for an interval;
- :mod:`~fieldrl.reportkit.layout`: the page (:data:`PAGE_WIDTH`), paragraph styles, table widths;
- :mod:`~fieldrl.reportkit.figures`: :func:`png_bytes`, the policy palette and the shared charts;
- :mod:`~fieldrl.reportkit.summary`: readers of ``summary.json``'s shape.

Nothing is imported here: :mod:`~fieldrl.reportkit.numbers` and :mod:`~fieldrl.reportkit.summary`
are plain Python that ``fieldrl list`` uses without loading reportlab, pandas or matplotlib.
"""
