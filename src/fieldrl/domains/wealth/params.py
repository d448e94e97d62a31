"""Scenario parameters of the wealth (GBWM) domain: which problem an investor faces."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from fieldrl.policies import memory_guard
from fieldrl.simulators.gbwm.dp import MAX_DENSITY, converged_bytes, grid_points, solve_bytes
from fieldrl.simulators.gbwm.engine import Frontier, Goal, Inflation, Problem, benchmark_problem

#: memory assumed free where the system does not say (no ``/proc/meminfo``): a small laptop's
DP_FALLBACK_FREE = 4 << 30


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GoalParams(_Strict):
    """A goal due at ``time`` with one or more ``[cost, utility]`` levels."""

    time: int = Field(ge=0, description="Year the goal falls due (0..T).")
    levels: list[tuple[float, float]] = Field(
        min_length=1, description="[cost, utility] pairs, same money units as W0; at most one is taken."
    )


class FrontierParams(_Strict):
    """Either asset ``means`` and ``cov`` (efficient frontier) or explicit ``portfolios``."""

    means: list[float] | None = Field(None, description="Expected annual asset returns.")
    cov: list[list[float]] | None = Field(None, description="Annual asset covariance matrix.")
    k: int = Field(15, ge=1, le=100, description="Portfolios on the frontier.")
    mu_min: float = Field(0.0526, description="Mean return of the most conservative portfolio.")
    mu_max: float = Field(0.0886, description="Mean return of the most aggressive portfolio.")
    portfolios: list[tuple[float, float]] | None = Field(
        None, description="Explicit [mu, sigma] portfolios instead of assets."
    )

    @model_validator(mode="after")
    def _one_source(self) -> FrontierParams:
        if self.portfolios is not None and (self.means is not None or self.cov is not None):
            raise ValueError("give either portfolios or means/cov, not both")
        if (self.means is None) != (self.cov is None):
            raise ValueError("means and cov go together")
        if self.mu_min > self.mu_max:
            raise ValueError(f"mu_min ({self.mu_min}) must not exceed mu_max ({self.mu_max})")
        return self

    def build(self) -> Frontier:
        if self.portfolios is not None:
            return Frontier.from_portfolios(self.portfolios)
        if self.means is None:
            return Frontier.default()
        return Frontier.from_assets(self.means, np.asarray(self.cov), self.k, self.mu_min, self.mu_max)


class InflationParams(_Strict):
    """Stochastic inflation of goal costs (``fieldrl.simulators.gbwm.engine.Inflation``).

    The price index starts at 1 and compounds a log inflation rate
    ``pi_t = mean + rho (pi_{t-1} - mean) + vol e_t`` each year; goal costs are listed in
    year-0 prices and paid at the index of the year they fall due.
    """

    mean: float = Field(
        0.025, ge=-0.2, le=0.5, allow_inf_nan=False, description="Long-run annual log inflation rate."
    )
    vol: float = Field(
        0.01,
        ge=0.0,
        le=0.5,
        allow_inf_nan=False,
        description="Standard deviation of the annual inflation innovation (0 = deterministic).",
    )
    rho: float = Field(
        0.0,
        gt=-1.0,
        lt=1.0,
        allow_inf_nan=False,
        description="Persistence of the inflation rate, AR(1) coefficient (0 = independent years).",
    )

    def build(self) -> Inflation:
        return Inflation(self.mean, self.vol, self.rho)


class WealthParams(_Strict):
    """One of: ``benchmark: n_goals``; explicit ``T``/``W0``/``goals``; or ``random: true``."""

    benchmark: int | None = Field(
        None,
        description="Benchmark family of the GBWM RL papers: goals (1, 2, 4, 8 or 16) over 16 years.",
    )
    random: bool = Field(False, description="Draw a new random problem every episode (meta-RL training).")
    T: int | None = Field(None, ge=1, le=100, description="Horizon in years (explicit problem).")
    W0: float | None = Field(None, gt=0, description="Initial wealth (explicit problem).")
    goals: list[GoalParams] = Field(default_factory=list, description="Goals (explicit problem).")
    infusions: list[float] | None = Field(
        None, description="Cash added each year t = 0..T-1 (explicit problem)."
    )
    frontier: FrontierParams = Field(default_factory=FrontierParams, description="Portfolios to choose from.")
    max_obs_goals: int = Field(4, ge=1, le=32, description="Upcoming goals described in the observation.")
    max_levels: int = Field(
        2, ge=1, le=8, description="Goal levels the action space offers (random problems)."
    )
    inflation: InflationParams | None = Field(
        None,
        description="Stochastic inflation of goal costs (an extra state variable; no DP optimum). "
        "None: costs as listed.",
    )
    goal_gap: StrictBool = Field(
        False,
        description="A learned policy's own observation (its `params:`): append how far wealth is from "
        "the next goal's cost, in log wealth and in volatilities of the years left.",
    )
    market_mean_shift: float = Field(
        0.0,
        ge=-4.0,
        le=4.0,
        description="Random problems only: percentage points added to the mean return of every portfolio "
        "drawn (a market regime; a fixed problem moves its frontier instead).",
    )
    market_vol_scale: float = Field(
        1.0,
        ge=0.5,
        le=2.0,
        description="Random problems only: factor on the volatility of every portfolio drawn.",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> WealthParams:
        explicit = self.T is not None or self.W0 is not None or bool(self.goals) or self.infusions is not None
        kinds = [self.benchmark is not None, self.random, explicit]
        if sum(kinds) > 1:
            raise ValueError("choose one of benchmark, random or an explicit problem (T, W0, goals)")
        if explicit and (self.T is None or self.W0 is None):
            raise ValueError("an explicit problem needs T and W0")
        if sum(kinds) == 0:
            self.benchmark = 4
        if not self.random:
            moved = [
                n for n, v in (("market_mean_shift", 0.0), ("market_vol_scale", 1.0)) if getattr(self, n) != v
            ]
            if moved:
                raise ValueError(
                    f"{moved[0]} moves the market of random problems (random: true); "
                    "a fixed problem's market is its frontier"
                )
            self.problem()  # surface the engine's validation errors (they name the field) now
        return self

    def market(self) -> tuple[float, float]:
        """``(mean shift, volatility factor)`` of random problems' markets, as the engine takes them."""
        return self.market_mean_shift / 100.0, self.market_vol_scale

    @model_validator(mode="after")
    def _dp_fits(self) -> WealthParams:
        """The DP optimum every episode is scored against (``pct_of_dp``) must fit in memory.

        Its wealth grid is spaced ``sigma_min / 32`` over a range set by the horizon, the volatilities
        and the wealth the goals span, so one tiny volatility (``1e-9``) asks for tens of GiB.
        """
        problem = None if self.random or self.inflation is not None else self.problem()
        if problem is not None:
            problem_text = dp_memory_problem(problem)
            if problem_text:
                field = "portfolios" if self.frontier.portfolios is not None else "cov"
                raise ValueError(f"frontier.{field}: {problem_text}")
        return self

    def inflation_model(self) -> Inflation | None:
        """The engine's inflation model, or None when costs do not inflate."""
        return None if self.inflation is None else self.inflation.build()

    def problem(self) -> Problem | None:
        """The fixed problem described, or None for ``random``."""
        if self.random:
            return None
        if self.benchmark is not None:
            return benchmark_problem(self.benchmark, frontier=self.frontier.build())
        goals = tuple(Goal(g.time, tuple(g.levels)) for g in self.goals)
        infusions = tuple(self.infusions) if self.infusions is not None else None
        return Problem(int(self.T or 1), float(self.W0 or 1.0), goals, self.frontier.build(), infusions)


def dp_memory_problem(
    problem: Problem, free: int | None = None, grid_density: float | None = None
) -> str | None:
    """Why the DP of ``problem`` would not fit in half the free memory, or None.

    :param free: bytes free (default: what the system reports now, else :data:`DP_FALLBACK_FREE`).
    :param grid_density: None: the converged DP every episode is scored against (grids refined up to
        :data:`~fieldrl.simulators.gbwm.dp.MAX_DENSITY`); a number: the ``dp`` heuristic's single grid
        of that density with exact ``(K, n, n)`` transition rows.
    """
    free = free or memory_guard.available_bytes() or DP_FALLBACK_FREE
    budget = int(free * memory_guard.SHARE)
    density = MAX_DENSITY if grid_density is None else grid_density

    def need_of(candidate: Problem) -> int:
        if grid_density is None:
            return converged_bytes(candidate)
        return solve_bytes(candidate, grid_density, rows="exact")

    need = need_of(problem)
    if need <= budget:
        return None
    smallest = _smallest_sigma(problem, budget, need_of)
    allowed = (
        f"allowed: every sigma >= {smallest:.3g} with this horizon and these goals"
        if smallest is not None
        else "no volatility fits: shorten T or narrow the wealth range of W0 and the goal costs"
    )
    what = "the DP optimum (pct_of_dp, the dp heuristic)" if grid_density is None else "the dp heuristic"
    return (
        f"{what} would need {memory_guard.gib(need)}, more than half "
        f"of the {memory_guard.gib(free)} this machine has free: its wealth grid is spaced sigma_min / "
        f"{density:g} with sigma_min = {float(problem.frontier.sigma.min()):.3g}, "
        f"{grid_points(problem, density):,} points; {allowed}"
    )


def _with_sigma_at_least(problem: Problem, floor: float) -> Problem:
    frontier = problem.frontier
    raised = Frontier(frontier.mu, np.maximum(frontier.sigma, floor))
    return dataclasses.replace(problem, frontier=raised)


def _smallest_sigma(problem: Problem, budget: int, need_of: Callable[[Problem], int]) -> float | None:
    """Smallest volatility floor under which the DP fits ``budget`` (bisection in log sigma), or None."""
    low, high = float(problem.frontier.sigma.min()), float(problem.frontier.sigma.max())
    if need_of(_with_sigma_at_least(problem, high)) > budget:
        return None
    for _ in range(60):
        middle = math.sqrt(low * high)
        if need_of(_with_sigma_at_least(problem, middle)) > budget:
            low = middle
        else:
            high = middle
    return high
