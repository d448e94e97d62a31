"""A KPI with no value for any policy (NaN everywhere, e.g. a share of an optimum that does not
exist in this setting) is left out of the findings and charts and never marked best."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from fieldrl.reportkit import figures
from fieldrl.reportkit.layout import stylesheet
from fieldrl.reports import findings, pdf
from fieldrl.results import Summary

NAN = math.nan
KPIS = [
    {"name": "score", "label": "Score", "unit": "", "higher_is_better": True, "wall_clock": False},
    {
        "name": "share",
        "label": "Share of optimum",
        "unit": "%",
        "higher_is_better": True,
        "wall_clock": False,
    },
    {"name": "cost", "label": "Cost", "unit": "$", "higher_is_better": False, "wall_clock": False},
]


def _stat(value: float, half: float = 1.0) -> dict[str, float]:
    return {"value": value, "low": value - half, "high": value + half}


def _kpi(value: float) -> dict[str, Any]:
    return {"mean": _stat(value), "iqm": _stat(value), "n_train_seeds": 1, "n_eval_seeds": 5}


def _diff(value: float, low: float, high: float) -> dict[str, Any]:
    return {"difference": {"value": value, "low": low, "high": high}, "relative_percent": _stat(NAN)}


def summary(**changed: dict[str, Any]) -> Summary:
    """The summary below, with ``changed`` policies' KPIs replaced (policy -> KPI -> stat)."""
    data = summary_data()
    for policy, kpis in changed.items():
        data["variants"]["default"]["policies"][policy].update(kpis)
    return Summary.model_validate(data)


def summary_data() -> dict[str, Any]:
    policies = {  # "share" is NaN for everyone; "cost" cannot be told apart
        "rule": {"score": _kpi(10.0), "share": _kpi(NAN), "cost": _kpi(5.0)},
        "other rule": {"score": _kpi(8.0), "share": _kpi(NAN), "cost": _kpi(5.1)},
        "agent": {"score": _kpi(12.0), "share": _kpi(NAN), "cost": _kpi(5.05)},
    }
    comparison = {
        "score": _diff(2.0, 1.0, 3.0),
        "share": _diff(NAN, NAN, NAN),
        "cost": _diff(0.05, -0.5, 0.6),
    }
    return {
        "confidence": 0.95,
        "bootstrap_samples": 100,
        "primary_kpi": "score",
        "kpis": KPIS,
        "policies": [
            {"name": "rule", "kind": "heuristic"},
            {"name": "other rule", "kind": "heuristic"},
            {"name": "agent", "kind": "learned"},
        ],
        "variants": {
            "default": {
                "policies": policies,
                "best_heuristic": "rule",
                "best_learned": "agent",
                "comparison": comparison,
                "probability_better": _stat(0.8, 0.1),
                "pairs": [{"policy": "agent", "baseline": "other rule", "kpis": comparison}],
            }
        },
    }


def test_findings_skip_a_kpi_that_has_no_value_for_the_compared_policies() -> None:
    lines = findings.variant_findings(summary(), "default")
    text = " ".join(lines)
    assert "share of optimum" not in text.lower()
    assert "no clear difference in cost." in text  # a measured KPI that ties is still reported
    assert lines[0].startswith("agent, the best learned policy, did better than rule")


def test_kpi_table_never_marks_an_all_nan_kpi_best() -> None:
    s = summary()
    ctx = SimpleNamespace(summary=s, styles=stylesheet())
    for stat in ("mean", "iqm"):
        cells = pdf.kpi_table(ctx, "default", stat)._cellvalues
        share = [row[2].text for row in cells[1:]]
        assert all(t.startswith("n/a") and "<b>" not in t for t in share), share
        assert [row[1].text.startswith("<b>") for row in cells[1:]] == [False, False, True]
        assert [row[3].text.startswith("<b>") for row in cells[1:]] == [True, False, False]
    assert pdf.best_policies(s.variant("default"), s.kpis) == {
        "score": "agent",
        "share": None,
        "cost": "rule",
    }
    assert "'Share of optimum' has no value for any policy" in pdf._not_measured_text(s, "default")
    full = summary(**{"other rule": {"share": _kpi(90.0)}})
    assert pdf._not_measured_text(full, "default") == ""
    assert pdf.best_policies(full.variant("default"), full.kpis)["share"] == "other rule"  # NaN others lose


def _panel_titles(monkeypatch: pytest.MonkeyPatch, draw: Any) -> list[str]:
    """Titles of the visible panels of the figure ``draw()`` renders."""
    drawn: list[Any] = []
    monkeypatch.setattr(figures, "png_bytes", lambda fig: drawn.append(fig) or b"")
    draw()
    (fig,) = drawn
    titles = [ax.get_title().split("\n")[0] for ax in fig.axes if ax.axison]
    figures.plt.close(fig)
    return titles


def test_charts_have_no_panel_for_an_all_nan_kpi(monkeypatch: pytest.MonkeyPatch) -> None:
    s = summary()
    assert _panel_titles(monkeypatch, lambda: figures.kpi_comparison(s, "default")) == ["Score", "Cost ($)"]
    assert _panel_titles(monkeypatch, lambda: figures.pair_differences(s, 0)) == ["Score", "Cost ($)"]
    assert [k.name for k in s.measured_kpis("default")] == ["score", "cost"]
