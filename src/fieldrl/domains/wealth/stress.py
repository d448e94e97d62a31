"""Stress axes of the wealth (GBWM) domain: the capital market regime a run's policies are tested
under, moved away from the one they trained in (``fieldrl stress``; :attr:`WealthDomain.stress_axes`).

Only the world moves: the mean returns and volatilities of the portfolios on offer and, where the
setting has stochastic inflation of goal costs, its long-run rate. The number of portfolios, the goal
levels offered and the goals described (everything the observation and action spaces are made of)
stay as the run trained them, so the trained networks load unchanged. The observation does show the
frontier's smallest and largest mean and volatility and, with inflation, the price index and last
year's rate: a policy sees the new regime in its input, as an adviser would read new capital-market
assumptions, but was never trained on it. The DP optimum (the ``dp`` heuristic and ``pct_of_dp``) is
solved again for the stressed problem, so "% of DP" at every point is against that world's optimum.

A moved frontier is written as explicit ``frontier.portfolios`` (each portfolio's mean plus the shift,
its volatility times the factor); at the trained value (shift 0, factor 1, the setting's own
inflation) ``apply`` returns the params untouched, so that point replays the plain evaluation exactly.

Default points and ranges, in the domain's units (see ``docs/wealth.md``, *Stress axes*). The shipped
frontier's 15 portfolios have mean returns from 5.26 % (mostly bonds) to 8.86 % a year (all US
stocks) and volatilities from 3.7 % to 19.6 %.

* **mean_shift**: -3, -1.5, 0, +1, +2 percentage points added to every portfolio's mean return. A
  point or so is a more pessimistic or optimistic set of capital-market assumptions; two or three is
  a decade of returns well below or above them (-2 points a year compounds to about 18 % less wealth
  after ten years, -3 to 26 %). The downside reaches further because it is where goals are missed.
  No two points share a magnitude: ``runner.partial_results`` names a point's folder without its
  sign, so ``-1`` and ``1`` would share one and the second would replay the first's results. Allowed
  -4 to +4: at -4 the safest portfolio earns 1.3 % a year.
* **vol_scale**: 0.5, 0.75, 1, 1.5, 2 times every portfolio's volatility: a calm market at half the
  assumed volatility up to crisis-level volatility at twice it. Allowed 0.5 to 2. (The DP's wealth
  grid is spaced by the smallest volatility: at 0.5 the 4-goal benchmark's takes 76 MB against 56 MB.)
* **inflation**: 0, 1, 2.5, 4, 6 % a year long-run mean of the log inflation rate of goal costs
  (``params.inflation.mean``): flat prices, below the 2 % central banks aim for, ``wealth/inflation``'s
  own 2.5 %, and inflation well above target for the whole plan. Allowed -2 to 10. Only where the
  setting has ``params.inflation``: adding it to a setting without it would add two observation
  entries (the price index and last year's rate), which the trained networks were not built for.

Not expressible as params, so not offered: a crash in a given year (the market model has one return
distribution per portfolio for every year). With ``random: true`` (meta-RL) each problem draws its own
frontier from the default one; the market axes then move every drawn frontier instead
(``params.market_mean_shift`` and ``params.market_vol_scale``), the problems otherwise drawn as before.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fieldrl.domains.base import StressAxis
from fieldrl.domains.wealth.params import FrontierParams, InflationParams, WealthParams

#: percentage points added to every portfolio's mean return: default points, and the range allowed
MEAN_SHIFT_POINTS = (-3.0, -1.5, 0.0, 1.0, 2.0)
MEAN_SHIFT_RANGE = (-4.0, 4.0)
#: factor on every portfolio's volatility
VOL_SCALE_POINTS = (0.5, 0.75, 1.0, 1.5, 2.0)
VOL_SCALE_RANGE = (0.5, 2.0)
#: long-run mean of the annual log inflation rate of goal costs, in % a year
INFLATION_POINTS = (0.0, 1.0, 2.5, 4.0, 6.0)
INFLATION_RANGE = (-2.0, 10.0)


def no_inflation(raw: dict[str, Any]) -> str | None:
    """Why the inflation axis cannot move a setting without ``params.inflation``, or None."""
    if raw.get("inflation") is None:
        return (
            "this setting has no params.inflation (goal costs as listed), and adding it would add the price "
            "index and inflation rate to the observation the trained networks were built for"
        )
    return None


def frontier_portfolios(raw: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(mu, sigma)`` of the portfolios the raw params' frontier builds."""
    frontier = FrontierParams.model_validate(raw.get("frontier") or {}).build()
    return frontier.mu, frontier.sigma


def with_frontier(raw: dict[str, Any], mu: np.ndarray, sigma: np.ndarray) -> dict[str, Any]:
    """Raw params whose frontier is the explicit portfolios ``(mu, sigma)``."""
    portfolios = [[float(m), float(s)] for m, s in zip(mu, sigma, strict=True)]
    return {**raw, "frontier": {"portfolios": portfolios}}


def shift_means(raw: dict[str, Any], points: float) -> dict[str, Any]:
    """Raw params with ``points`` percentage points added to every portfolio's mean return (of every
    problem drawn, with ``random``)."""
    if raw.get("random"):
        return raw if points == raw.get("market_mean_shift", 0.0) else {**raw, "market_mean_shift": points}
    if points == 0.0:
        return raw
    mu, sigma = frontier_portfolios(raw)
    return with_frontier(raw, mu + points / 100.0, sigma)


def scale_volatility(raw: dict[str, Any], factor: float) -> dict[str, Any]:
    """Raw params with every portfolio's volatility multiplied by ``factor`` (of every problem drawn, with
    ``random``: the factor replaces the setting's own)."""
    if raw.get("random"):
        return raw if factor == raw.get("market_vol_scale", 1.0) else {**raw, "market_vol_scale": factor}
    if factor == 1.0:
        return raw
    mu, sigma = frontier_portfolios(raw)
    return with_frontier(raw, mu, sigma * factor)


def trained_inflation(params: WealthParams) -> float:
    """The setting's long-run inflation of goal costs in % a year (0 without ``params.inflation``)."""
    return 0.0 if params.inflation is None else round(params.inflation.mean * 100.0, 9)


def set_inflation(raw: dict[str, Any], percent: float) -> dict[str, Any]:
    """Raw params with the long-run mean of the inflation of goal costs at ``percent`` % a year."""
    own = raw["inflation"]  # the axis's problem refuses a setting without it
    mean = percent / 100.0
    if math.isclose(mean, InflationParams.model_validate(own).mean, rel_tol=0.0, abs_tol=1e-12):
        return raw
    return {**raw, "inflation": {**own, "mean": mean}}


def stress_axes() -> dict[str, StressAxis]:
    """The wealth domain's stress axes by name (why these points and ranges: the module doc)."""
    return {
        "mean_shift": StressAxis(
            label="Mean return shift",
            unit="percentage points a year",
            points=MEAN_SHIFT_POINTS,
            low=MEAN_SHIFT_RANGE[0],
            high=MEAN_SHIFT_RANGE[1],
            trained=lambda params: params.market_mean_shift if params.random else 0.0,
            apply=shift_means,
            fmt="g",
        ),
        "vol_scale": StressAxis(
            label="Market volatility",
            unit="× the trained volatilities",
            points=VOL_SCALE_POINTS,
            low=VOL_SCALE_RANGE[0],
            high=VOL_SCALE_RANGE[1],
            trained=lambda params: params.market_vol_scale if params.random else 1.0,
            apply=scale_volatility,
            fmt="g",
        ),
        "inflation": StressAxis(
            label="Inflation of goal costs",
            unit="% a year, long-run mean",
            points=INFLATION_POINTS,
            low=INFLATION_RANGE[0],
            high=INFLATION_RANGE[1],
            trained=trained_inflation,
            apply=set_inflation,
            fmt="g",
            problem=no_inflation,
        ),
    }
