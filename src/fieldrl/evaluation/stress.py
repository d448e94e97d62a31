"""Stress maps: a run's trained policies on its held-out seeds, with one condition of the world moved
away from what training saw (``fieldrl stress``). Nothing is retrained.

A domain declares its axes (:attr:`fieldrl.domains.base.Domain.stress_axes`: observation noise,
demand, market volatility, ...), each a function from params to the world at a value. A stress job is
an evaluation job with an axis and a point (:class:`~fieldrl.evaluation.runner.EvalJob`), so it plays
the same held-out episodes, with the same seeds, as the plain evaluation; at the value the run trained
at it reproduces the plain evaluation exactly. Per point, every policy's KPIs are summarised as the
plain evaluation's are, and the best learned policy is compared with the best standard policy of the
plain evaluation, paired on the same held-out cases: where its advantage holds, where it flips.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, SerializationInfo, SerializerFunctionWrapHandler, model_serializer

from fieldrl.domains.base import Domain
from fieldrl.errors import FieldrlError
from fieldrl.evaluation import runner
from fieldrl.evaluation.stats import Bootstrap, describe, paired_difference, value_matrix
from fieldrl.evaluation.store import RunFolder
from fieldrl.results import Described, Paired, Summary, VariantResult
from fieldrl.scenario import Scenario, stress_points, stressed_params

STRESS_RESULTS = "stress/results.parquet"
STRESS_SUMMARY = "stress/summary.json"
#: columns of ``stress/results.parquet``: the plain results' and the axis and point
STRESS_COLUMNS = ["axis", "point", *runner.RESULT_COLUMNS]


# ----------------------------------------------------------------------------- what to run


def stress_plan(
    scenario: Scenario, domain: Domain, wanted: Sequence[tuple[str, list[float] | None]] | None = None
) -> dict[str, list[float]]:
    """Axis -> the points to test: ``wanted`` (``--axis``: axis, and points or None for the
    domain's), else the scenario's ``stress`` section, else every axis of the domain at its default
    points. Each is checked (:func:`~fieldrl.scenario.stress_points`); a problem is one line."""
    if wanted is None and scenario.stress is not None:
        wanted = [(a.axis, a.points) for a in scenario.stress.axes]
    elif wanted is None:  # every axis that can move this world
        raws = stressed_params(scenario)
        axes = domain.stress_axes
        wanted = [(name, None) for name, axis in axes.items() if not any(axis.problem(raw) for raw in raws)]
    if not wanted:
        raise FieldrlError(
            f"domain {domain.name} has no stress axis that applies to this run: nothing to stress"
        )
    plan: dict[str, list[float]] = {}
    for name, points in wanted:
        plan[name], problem = stress_points(scenario, domain, name, points)
        if problem:
            part, value, allowed = problem
            shown = f"{name}={','.join(format(v, 'g') for v in points)}" if points else name
            what = "" if part == "axis" else f" (value {value:g})"
            raise FieldrlError(f"--axis = {shown!r}{what}: {allowed}")
    return plan


def stress_jobs(scenario: Scenario, plan: dict[str, list[float]]) -> list[runner.EvalJob]:
    """Every evaluation job of the stressed settings, at every point of every axis of ``plan``."""
    stressed = set(scenario.stressed_variants)
    return [
        runner.EvalJob(job.variant, job.policy, job.train_seed, axis, float(point))
        for axis, points in plan.items()
        for point in points
        for job in runner.eval_jobs(scenario)
        if job.variant in stressed
    ]


# ----------------------------------------------------------------------------- the summary


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class StressPoint(_Strict):
    """One point of an axis in one setting: every policy's KPIs and best learned minus best standard."""

    value: float
    #: policy -> KPI -> its mean and IQM at this point (a policy without results here is absent)
    policies: dict[str, dict[str, Described]]
    #: best learned minus best standard policy, per KPI (None without both)
    comparison: dict[str, Paired] | None = None
    failed_episodes: int = 0

    @model_serializer(mode="wrap")
    def _non_finite_as_null(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        """In JSON (``stress/summary.json``), a NaN or infinite number of the KPIs and comparison is null,
        as the file has always held it (:class:`~fieldrl.results.Interval` reads null back as NaN)."""
        data = handler(self)
        if not info.mode_is_json():
            return data
        # the mappings (policies and comparison); the point's own value stays as it was written
        return {k: _non_finite_as_null(v) if isinstance(v, dict) else v for k, v in data.items()}

    def cases(self, kpi: str) -> int:
        """Held-out cases behind every policy's ``kpi`` at this point: the fewest of any."""
        counts = [p[kpi].n_eval_seeds for p in self.policies.values() if kpi in p]
        return min(counts, default=0)

    def results(self) -> VariantResult:
        """This point's KPIs as a setting's results are read (stats, means, scale, cases)."""
        return VariantResult(policies=self.policies)

    def described(self, policy: str, kpi: str) -> Described | None:
        """``policy``'s ``kpi`` at this point; None where it has none."""
        return self.policies.get(policy, {}).get(kpi)

    def compared(self, kpi: str) -> Paired | None:
        """Best learned minus best standard policy on ``kpi`` at this point; None without the pair."""
        return (self.comparison or {}).get(kpi)


def _non_finite_as_null(data: Any) -> Any:
    """``data`` with every NaN or infinite float inside it replaced by None."""
    if isinstance(data, dict):
        return {k: _non_finite_as_null(v) for k, v in data.items()}
    if isinstance(data, float) and not math.isfinite(data):
        return None
    return data


class StressSetting(_Strict):
    trained: float
    best_heuristic: str | None
    best_learned: str | None
    points: list[StressPoint]


class StressAxisResult(_Strict):
    label: str
    unit: str
    fmt: str
    log: bool = False
    variants: dict[str, StressSetting]


class StressSummary(_Strict):
    """``stress/summary.json``."""

    primary_kpi: str
    primary_label: str
    primary_unit: str
    higher_is_better: bool
    confidence: float
    axes: dict[str, StressAxisResult]

    def plan(self) -> dict[str, list[float]]:
        """Axis -> the points this summary holds."""
        return {
            name: [p.value for p in next(iter(result.variants.values())).points]
            for name, result in self.axes.items()
            if result.variants
        }


def summarize_stress(
    results: pd.DataFrame,
    failures: list[dict[str, Any]],
    scenario: Scenario,
    domain: Domain,
    plan: dict[str, list[float]],
    summary: Summary,
) -> StressSummary:
    """Per axis, setting and point: every policy's KPIs, and the best learned policy minus the best
    standard policy of the plain evaluation (``summary``), paired on the same held-out cases."""
    options = scenario.report
    eval_seeds = list(scenario.seeds.eval)
    axes: dict[str, StressAxisResult] = {}
    for name, points in plan.items():
        axis = domain.stress_axes[name]
        settings: dict[str, StressSetting] = {}
        for variant in scenario.stressed_variants:
            plain = summary.variant(variant)
            best_h, best_l = plain.best_heuristic, plain.best_learned
            params = domain.params_model.model_validate(scenario.variant_params(variant))
            rows: list[StressPoint] = []
            for value in points:
                here = results[(results["axis"] == name) & (results["point"] == value)]
                here = here[here["variant"] == variant]
                lost = [
                    f
                    for f in failures
                    if f["axis"] == name and f["point"] == value and f["variant"] == variant
                ]
                rows.append(_point(here, value, lost, scenario, domain, best_h, best_l, eval_seeds, options))
            settings[variant] = StressSetting(
                trained=float(axis.trained(params)), best_heuristic=best_h, best_learned=best_l, points=rows
            )
        axes[name] = StressAxisResult(
            label=axis.label, unit=axis.unit, fmt=axis.fmt, log=axis.log, variants=settings
        )
    primary = runner.primary_kpi(scenario, domain)
    return StressSummary(
        primary_kpi=primary.name,
        primary_label=primary.label,
        primary_unit=primary.unit,
        higher_is_better=primary.higher_is_better,
        confidence=options.confidence,
        axes=axes,
    )


def _point(
    rows: pd.DataFrame,
    value: float,
    lost: list[dict[str, Any]],
    scenario: Scenario,
    domain: Domain,
    best_h: str | None,
    best_l: str | None,
    eval_seeds: list[int],
    options: Any,
) -> StressPoint:
    boot = Bootstrap(len(eval_seeds), options.bootstrap_samples, seed=0)  # as the plain summary's
    matrices: dict[str, dict[str, np.ndarray]] = {}
    for name, _ in scenario.policies.by_kind:
        prow = rows[rows["policy"] == name]
        if not prow.empty:
            matrices[name] = {
                k.name: value_matrix(prow[prow["metric"] == k.name], eval_seeds) for k in domain.kpis
            }
    policies = {
        name: {kpi: describe(m, boot, options.confidence) for kpi, m in kpis.items()}
        for name, kpis in matrices.items()
    }
    comparison = None
    if best_h in matrices and best_l in matrices:
        comparison = {
            k.name: paired_difference(
                matrices[best_l][k.name], matrices[best_h][k.name], boot, options.confidence
            )
            for k in domain.kpis
        }
    return StressPoint(value=value, policies=policies, comparison=comparison, failed_episodes=len(lost))


def read_stress_summary(folder: RunFolder) -> StressSummary | None:
    """``stress/summary.json`` as fieldrl wrote it (checked against the manifest and its shape), or
    None where the run was not stressed."""
    if STRESS_SUMMARY not in folder.hashes():
        return None
    return folder.read_model(STRESS_SUMMARY, StressSummary)


# ----------------------------------------------------------------------------- in words


def verdict_runs(values: list[float], verdicts: list[str]) -> list[tuple[str, float, float]]:
    """Consecutive points with the same verdict: ``(verdict, first value, last value)`` in order."""
    runs: list[tuple[str, float, float]] = []
    for value, said in zip(values, verdicts, strict=True):
        if runs and runs[-1][0] == said:
            runs[-1] = (said, runs[-1][1], value)
        else:
            runs.append((said, value, value))
    return runs
