"""From the tidy results table to ``summary.json`` (:class:`fieldrl.results.Summary`): per-policy
aggregates with CIs, the best heuristic and best learned policy per variant, and their paired comparison."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fieldrl.domains.base import Domain
from fieldrl.evaluation.stats import (
    Bootstrap,
    describe,
    paired_difference,
    probability_better,
    spread_difference,
    value_matrix,
)
from fieldrl.results import Described, Summary
from fieldrl.scenario import Scenario


def summarize(
    results: pd.DataFrame,
    scenario: Scenario,
    domain: Domain,
    budget: str,
    failures: list[Any] | None = None,
    validation: dict[str, Any] | None = None,
) -> Summary:
    """The run's :class:`~fieldrl.results.Summary` from its tidy results table; ``failures`` (the failed
    held-out episodes) and ``validation`` (the heuristics' validation scores and each model's training
    record) are set where given, as evaluation writes them.

    Built as the mapping ``summary.json`` holds (its numbers already the results model's classes, from
    :mod:`~fieldrl.evaluation.stats`) and validated once: only the keys set here are set in the model,
    so that ``model_dump(exclude_unset=True)`` writes the file fieldrl has always written (no
    ``comparison`` key in a setting without both kinds of policy, for one)."""
    options = scenario.report
    primary = domain.kpi(options.primary_kpi or domain.kpis[0].name)
    eval_seeds = list(scenario.seeds.eval)
    policies = scenario.policies.by_kind
    oracles = oracle_labels(scenario, domain)
    summary: dict[str, Any] = {
        "scenario": scenario.name,
        "domain": domain.name,
        "budget": budget,
        "confidence": options.confidence,
        "bootstrap_samples": options.bootstrap_samples,
        "primary_kpi": primary.name,
        "selection_kpi": scenario.report.selection_kpi or primary.name,
        "kpis": [
            {
                "name": k.name,
                "label": k.label,
                "unit": k.unit,
                "higher_is_better": k.higher_is_better,
                "wall_clock": k.wall_clock,
                "among": k.among,
                "binary": k.binary,
                "ranked": k.ranked and not k.wall_clock,
            }
            for k in domain.kpis
        ],
        "policies": [{"name": n, "kind": kind} for n, kind in policies],
        "oracles": oracles,
        "variants": {},
    }

    for variant in scenario.variant_names:
        boot = Bootstrap(len(eval_seeds), options.bootstrap_samples, seed=0)
        vrows = results[results["variant"] == variant]
        matrices: dict[str, dict[str, Any]] = {}
        per_policy: dict[str, dict[str, Described]] = {}
        for name, _ in policies:
            prow = vrows[vrows["policy"] == name]
            if prow.empty:
                continue
            matrices[name] = {}
            per_policy[name] = {}
            for kpi in domain.kpis:
                m = value_matrix(prow[prow["metric"] == kpi.name], eval_seeds)
                matrices[name][kpi.name] = m
                per_policy[name][kpi.name] = describe(m, boot, options.confidence)
        entry: dict[str, Any] = {"policies": per_policy}
        best = {  # an oracle (an exact optimiser) is a reference, never "the best standard policy"
            kind: _best(
                [n for n, k in policies if k == kind and n in per_policy and n not in oracles],
                per_policy,
                primary,
            )
            for kind in ("heuristic", "learned")
        }
        entry["best_heuristic"], entry["best_learned"] = best["heuristic"], best["learned"]
        if best["heuristic"] and best["learned"]:
            lm, hm = matrices[best["learned"]], matrices[best["heuristic"]]
            entry["comparison"] = {
                k.name: paired_difference(lm[k.name], hm[k.name], boot, options.confidence)
                for k in domain.kpis
            }
            entry["probability_better"] = probability_better(
                lm[primary.name],
                hm[primary.name],
                primary.higher_is_better,
                boot,
                options.confidence,
            )
        entry["pairs"] = [
            _pair(pair, matrices, domain.kpis, primary, boot, options.confidence)
            for pair in options.comparisons
            if pair.policy in matrices and pair.baseline in matrices
        ]
        summary["variants"][variant] = entry
    if failures is not None:
        summary["failed_episodes"] = failures
    if validation is not None:
        summary["validation"] = validation
    return Summary.model_validate(summary)


def oracle_labels(scenario: Scenario, domain: Domain) -> list[str]:
    """Labels of the scenario's heuristic entries that are exact optimisers (see ``HeuristicSpec.oracle``)."""
    return [e.label for e in scenario.policies.heuristics if domain.heuristics[e.use].oracle]


def _best(names: list[str], per_policy: dict[str, dict[str, Described]], kpi: Any) -> str | None:
    if not names:
        return None
    sign = 1 if kpi.higher_is_better else -1
    return max(names, key=lambda n: sign * per_policy[n][kpi.name].mean.value)


def _pair(
    pair: Any,
    matrices: dict[str, dict[str, Any]],
    kpis: list[Any],
    primary: Any,
    boot: Bootstrap,
    confidence: float,
) -> dict[str, Any]:
    """A requested comparison: the paired difference on every KPI and, where both sides are learned
    on two or more training seeds, how their spread across training seeds compares (on the primary KPI)."""
    policy, baseline = matrices[pair.policy], matrices[pair.baseline]
    out: dict[str, Any] = {
        "policy": pair.policy,
        "baseline": pair.baseline,
        "kpis": {k.name: paired_difference(policy[k.name], baseline[k.name], boot, confidence) for k in kpis},
    }
    p, b = policy[primary.name], baseline[primary.name]
    if p.shape[0] >= 2 and b.shape[0] >= 2:
        out["stability"] = spread_difference(p, b, boot, confidence, primary.higher_is_better, primary.name)
    return out
