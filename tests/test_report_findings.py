"""Page 1 and the findings respect the data: no intervals or win rates below the minimum sample, optimisers
named as such, no IQM of a yes/no outcome, nothing bolded or called better on a measure that is not ranked."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fieldrl.reportkit.context import for_report, too_few_cases
from fieldrl.reportkit.layout import stylesheet
from fieldrl.reportkit.numbers import MIN_CASES, with_range
from fieldrl.reports import front, pdf
from fieldrl.reports.findings import variant_findings
from fieldrl.results import Kpi, Paired, Summary

KPIS = [
    {"name": "score", "label": "Score", "unit": "", "higher_is_better": True},
    {"name": "alive", "label": "Survival", "unit": "%", "higher_is_better": True, "binary": True},
    {"name": "dose", "label": "Total dose", "unit": "days", "higher_is_better": False, "ranked": False},
    {"name": "ms", "label": "Solve time", "unit": "ms", "higher_is_better": False, "wall_clock": True},
]


def _stat(value: float, n: int, half: float = 1.0) -> dict[str, Any]:
    s = {"value": value, "low": value - half, "high": value + half}
    return {"mean": s, "iqm": s, "n_train_seeds": 1, "n_eval_seeds": n}


def _diff(value: float, half: float = 1.0) -> dict[str, Any]:
    return {
        "difference": {"value": value, "low": value - half, "high": value + half},
        "relative_percent": {"value": 50.0, "low": 40.0, "high": 60.0},
    }


def summary(n: int, oracle: bool = False, variants: tuple[str, ...] = ("default",)) -> Summary:
    return Summary.model_validate(summary_data(n, oracle, variants))


def summary_data(n: int, oracle: bool = False, variants: tuple[str, ...] = ("default",)) -> dict[str, Any]:
    values = {  # policy -> score, survival, dose, ms
        "rule": (10.0, 50.0, 20.0, 1.0),
        "agent": (14.0, 80.0, 2.0, 0.5),
        "optimum": (20.0, 90.0, 10.0, 30.0),
    }
    names = ["rule", "agent"] + (["optimum"] if oracle else [])
    entry = {
        "policies": {p: {k["name"]: _stat(values[p][i], n) for i, k in enumerate(KPIS)} for p in names},
        "best_heuristic": "rule",
        "best_learned": "agent",
        "comparison": {"score": _diff(4.0), "alive": _diff(30.0), "dose": _diff(-18.0), "ms": _diff(-0.5)},
        "probability_better": {"value": 0.9, "low": 0.8, "high": 1.0},
        "pairs": [],
    }
    kinds = {"rule": "heuristic", "agent": "learned", "optimum": "heuristic"}
    return {
        "scenario": "s",
        "confidence": 0.95,
        "bootstrap_samples": 100,
        "primary_kpi": "score",
        "kpis": KPIS,
        "policies": [{"name": p, "kind": kinds[p]} for p in names],
        "oracles": ["optimum"] if oracle else [],
        "variants": {v: entry for v in variants},
    }


def _cells(s: Summary, stat: str = "mean") -> list[list[str]]:
    ctx = SimpleNamespace(summary=s, styles=stylesheet())
    (table,) = pdf.kpi_tables(ctx, next(iter(s.variants)), stat)
    return [[getattr(c, "text", c) for c in row] for row in table._cellvalues]


def test_below_the_minimum_sample_there_are_no_intervals_and_no_win_rates() -> None:
    text = " ".join(variant_findings(summary(n=MIN_CASES - 1), "default"))
    assert "too few held-out cases to compare" in text
    assert "95 % CI" not in text and "of the time" not in text and "did better" not in text
    rows = _cells(summary(n=2))
    assert not any("[" in cell for row in rows[1:] for cell in row[1:])  # no bracketed CI in the table
    enough = " ".join(variant_findings(summary(n=MIN_CASES), "default"))
    assert "95 % CI" in enough and "of the time" in enough


def test_page_one_verdict_says_too_few_cases_instead_of_comparing() -> None:
    s = summary(n=3)
    sentence = front.verdict_sentence(s, "default", [s.kpi("alive")])
    assert "3 held-out cases, too few to compare agent" in sentence
    assert "better" not in sentence
    several = front.settings_sentence(summary(n=3, variants=("a", "b")))
    assert "Across 2 settings, too few held-out cases (3 in each" in several


def test_page_one_verdict_names_the_headline_measures() -> None:
    s = summary(n=20)
    sentence = front.verdict_sentence(s, "default", [s.kpi("alive"), s.kpi("dose")])
    assert sentence.startswith("Against rule, the best standard policy, agent, the best learned policy,")
    assert "did better on survival" in sentence
    assert "not ranked, but different: total dose" in sentence and "(over 20 held-out cases)" in sentence


def test_an_optimiser_is_named_as_one_and_never_the_best_standard_policy() -> None:
    s = summary(n=20, oracle=True)
    lines = variant_findings(s, "default")
    assert lines[0].startswith("agent, the best learned policy, did better than rule, the best standard")
    assert any("optimum is an exact optimiser that knows the model" in line for line in lines)
    rows = _cells(s)
    kinds = {row[0].split("<br/>")[0]: row[0] for row in rows[1:]}
    assert "optimum (reference)" in kinds["optimum"] and "standard" in kinds["rule"]


def test_an_optimiser_is_not_picked_as_best_heuristic_when_summarising() -> None:
    import numpy as np
    import pandas as pd

    from fieldrl.domains import get_domain
    from fieldrl.evaluation.summary import summarize
    from fieldrl.scenario import load_scenario

    scenario = load_scenario("wealth/single-goal").with_budget("demo")
    domain = get_domain("wealth")
    rows = []
    labels = [e.label for e in scenario.policies.heuristics]
    dp = next(e.label for e in scenario.policies.heuristics if e.use == "dp")
    for i, policy in enumerate(labels):
        for seed in scenario.seeds.eval:
            for metric in (k.name for k in domain.kpis):
                value = 100.0 if policy == dp else float(i)  # the optimum scores best on everything
                rows.append(("default", policy, "heuristic", -1, seed, 0, metric, value))
    results = pd.DataFrame(
        rows, columns=["variant", "policy", "kind", "train_seed", "eval_seed", "episode", "metric", "value"]
    )
    s = summarize(results, scenario, domain, "quick")
    assert s.oracles == [dp]
    best = s.variant("default").best_heuristic
    assert best != dp and best in labels
    assert np.isfinite(s.variant("default").value(dp, "utility"))
    # a summary written before optimisers were set apart is re-summarised by the report from its results
    data = s.model_dump(exclude_unset=True)
    data["variants"]["default"]["best_heuristic"] = dp
    del data["oracles"]
    old = Summary.model_validate(data)
    fixed = pdf._without_oracle_as_best(old, results, scenario, domain)
    assert fixed.variant("default").best_heuristic == best and fixed.oracles == [dp]
    assert pdf._without_oracle_as_best(s, results, scenario, domain) is s  # a file with oracles: as it is


def test_no_iqm_for_a_yes_no_outcome() -> None:
    rows = _cells(summary(n=20), stat="iqm")
    survival = [row[2] for row in rows[1:]]
    assert all(cell.startswith("n/a") and "yes/no" in cell for cell in survival)
    assert all(not row[1].startswith("n/a") for row in rows[1:])  # the score keeps its IQM


def test_unranked_measures_are_never_bold_nor_called_better() -> None:
    rows = _cells(summary(n=20))
    header = rows[0]
    assert "not ranked" in header[3] and "not ranked" in header[4]
    for row in rows[1:]:
        assert "<b>" not in row[3] and "<b>" not in row[4]  # total dose, solve time
    assert any("<b>" in row[1] for row in rows[1:])  # the ranked score does have a best
    text = " ".join(variant_findings(summary(n=20), "default"))
    assert "better on total dose" not in text and "not ranked, but different: total dose" in text.lower()


def test_intervals_are_blanked_for_the_domain_pages_below_the_minimum_sample() -> None:
    few = for_report(summary(n=2)).variant("default")
    assert too_few_cases(few)
    stats = few.stat("agent", "score")
    assert stats.value == 14.0 and with_range(stats, " %") == "14 %"  # the mean stays, no bracket
    assert with_range(few.compared("score").difference) == "4"
    assert not few.probability_better.has_range
    enough = for_report(summary(n=MIN_CASES)).variant("default")
    assert not too_few_cases(enough)
    assert with_range(enough.stat("agent", "score"), " %") == "14 % [13, 15]"


def test_page_one_of_several_settings_says_when_a_tie_on_the_primary_hides_a_loss_elsewhere() -> None:
    data = summary_data(n=20, variants=("a", "b"))
    tie = {
        **data["variants"]["a"],
        "comparison": {**data["variants"]["a"]["comparison"], "score": _diff(0.0)},
    }
    worse = {**tie, "comparison": {**tie["comparison"], "alive": _diff(-30.0)}}
    data["variants"] = {"a": tie, "b": worse}
    s = Summary.model_validate(data)
    sentence = front.settings_sentence(s, ("score", "alive"))
    assert "could not be told apart in 2" in sentence
    assert "clearly worse in 1 of them (b; see the table)" in sentence
    assert "clearly worse" not in front.settings_sentence(s)  # no headline measures named: primary only
    ctx = SimpleNamespace(summary=s, domain=SimpleNamespace(headline_kpis=("score", "alive")))
    assert front._other_headlines(ctx, "b").startswith("<br/><b>Worse:</b> ")
    assert front._other_headlines(ctx, "a").startswith("<br/><b>Better:</b> ")  # survival better there


def test_a_policy_identical_to_its_rival_on_every_case_is_said_to_be_the_same() -> None:
    """A clone kept by selection (uav/dense-city's warm start) must not read "0 points lower"."""
    from fieldrl.reports.findings import _change

    kpi = Kpi(name="success_rate", label="Task success rate", unit="%", higher_is_better=True)
    zero = {"value": 0.0, "low": 0.0, "high": 0.0}
    paired = Paired.model_validate({"difference": zero, "relative_percent": zero})
    verdict, phrase = _change(kpi, paired, 45.08, 45.08, 67.65)
    assert verdict == "unclear" and phrase == "task success rate the same on every held-out case"
    tiny = {"value": 0.0, "low": -0.05, "high": 0.05}
    _, phrase = _change(
        kpi, Paired.model_validate({"difference": tiny, "relative_percent": tiny}), 45.08, 45.08, 67.65
    )
    assert "the same on every" not in phrase and "95 % CI" in phrase


def test_table_cells_keep_one_precision_and_prose_drops_trailing_zeros() -> None:
    """A column reads 81.0 above 83.9 (not 81); prose says "6 percentage points"; 999.6 is not 1e+03."""
    from fieldrl.reportkit.numbers import fmt, fmt_cell

    assert [fmt_cell(v) for v in (81, 83.9, 0.25, -6, 100.4, 0, 0.004, float("nan"))] == [
        "81.0", "83.9", "0.250", "-6.00", "100", "0", "≈0", "n/a"
    ]  # fmt: skip
    assert [fmt(v) for v in (81, 0.25, -6)] == ["81", "0.25", "-6"]
    assert fmt(999.6) == fmt_cell(999.6) == "1,000" and fmt(1234.5) == "1,234"
