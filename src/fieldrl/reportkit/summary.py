"""Reading ``summary.json``: which KPIs were measured, how many held-out cases back a number.

The summary is the plain mapping :func:`fieldrl.evaluation.summary.summarize` writes (and the
report reads back from the run folder); these helpers know its shape so that no page has to.
"""

from __future__ import annotations

from typing import Any

from fieldrl.reportkit.numbers import finite


def measured_kpis(summary: dict[str, Any], variant: str, stat: str = "mean") -> list[dict[str, Any]]:
    """The KPIs with a value for at least one policy in ``variant``.

    A KPI that is NaN for every policy (one that does not apply in this setting, e.g. a
    share of an optimum that does not exist) has nothing to chart and no best policy.
    """
    policies = summary["variants"][variant]["policies"].values()
    return [k for k in summary["kpis"] if any(finite(p[k["name"]][stat]["value"]) for p in policies)]


def ranked(kpi: dict[str, Any]) -> bool:
    """Whether "best", "better" and "worse" apply to this KPI (not a computation time, not a trade-off)."""
    return bool(kpi.get("ranked", True)) and not kpi.get("wall_clock")


def cases(entry: dict[str, Any], *policies: str) -> int:
    """Held-out cases (evaluation seeds) behind the policies' numbers in one variant's ``entry``:
    the fewest of any of them."""
    counts = [next(iter(entry["policies"][p].values())).get("n_eval_seeds", 0) for p in policies]
    return min(counts, default=0)
