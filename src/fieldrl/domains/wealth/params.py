"""Scenario parameters of the wealth (GBWM) domain: which problem an investor faces."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fieldrl.simulators.gbwm.engine import Frontier, Goal, Inflation, Problem, benchmark_problem


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
            self.problem()  # surface the engine's validation errors (they name the field) now
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
