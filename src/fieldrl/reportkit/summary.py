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


# -- failed held-out episodes (``summary["failed_episodes"]``) ------------------------------------

#: the reason recorded for a held-out episode whose policy answered NaN or infinite actions
#: (a learned model whose weights are NaN: a diverged training, a NaN weights file)
NON_FINITE_ACTIONS = "policy produced non-finite actions (NaN weights?)"
#: what ended the episodes of each cause, in words that follow "N held-out episode(s) ended"
_ENDED = {
    "simulator": "in a simulator error",
    "non-finite": "because the policy produced non-finite actions (NaN weights?)",
}


def failure_cause(reason: str) -> str:
    """What ended a failed episode, from its recorded reason: ``"non-finite"`` (the policy's
    actions) or ``"simulator"`` (what the simulator, env or domain raised; also every reason of a
    run evaluated before the two were told apart)."""
    return "non-finite" if reason.startswith(NON_FINITE_ACTIONS) else "simulator"


def failures_in(summary: dict[str, Any], variant: str) -> list[dict[str, Any]]:
    """The failed held-out episodes of setting ``variant``."""
    return [f for f in summary.get("failed_episodes") or [] if f.get("variant") == variant]


def failures_ended(failed: list[dict[str, Any]]) -> str:
    """How ``failed`` episodes ended, in words after "N held-out episode(s) ended":
    ``in a simulator error``, or with counts where causes differ (``in a simulator error (2) or
    because the policy produced non-finite actions (NaN weights?) (1)``)."""
    counts: dict[str, int] = {}
    for f in failed:
        cause = failure_cause(str(f.get("reason", "")))
        counts[cause] = counts.get(cause, 0) + 1
    if not counts:  # no failure recorded (a run whose KPIs are all NaN): nothing to blame
        return "without a result"
    if len(counts) == 1:
        return _ENDED[next(iter(counts))]
    return " or ".join(f"{_ENDED[cause]} ({n})" for cause, n in counts.items())
