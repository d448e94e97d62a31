"""Goals-based wealth management (GBWM): goals, an efficient frontier and a GBM market.

An investor starts with wealth ``W0`` and makes one decision a year, ``t = 0 .. T-1``:
first, if a goal falls due at ``t``, which of its levels to take (or none; a level
costing ``c`` is affordable when ``c <= W_t``); then a portfolio ``k`` on the efficient
frontier. Wealth then grows over the year by geometric Brownian motion::

    W_{t+1} = (W_t - c + I_t) * exp(mu_k - sigma_k**2 / 2 + sigma_k * Z),   Z ~ N(0, 1)

with ``I_t`` the cash infusion of year ``t``. A goal due at ``T`` is settled at ``T``
with no further portfolio choice: the best affordable level is taken. The objective
is the expected total utility of the goals taken; wealth left over is worth nothing.
(Das, Ostrov, Radhakrishnan & Srivastav 2020; Das et al. 2022/2024; see ``docs/wealth.md``.)

Optional extension (:class:`Inflation`): goal costs due at year ``t`` are multiplied by a
random price index ``P_t`` (``P_0 = 1``), an extra state variable the DP solver does not
model; off by default, and then the engine is exactly the model above.

:class:`WealthBatch` steps many investors at once (numpy, no gym); :func:`simulate`
runs a policy over many Monte Carlo paths. The dynamic-programming optimum lives in
:mod:`fieldrl.simulators.gbwm.dp`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

#: asset means of the three-asset example of Das et al. (2020): US bonds, international and US stocks.
DEFAULT_MEANS = np.array([0.0493, 0.0770, 0.0886])
#: their covariance matrix.
DEFAULT_COV = np.array(
    [
        [0.0017, -0.0017, -0.0021],
        [-0.0017, 0.0396, 0.0309],
        [-0.0021, 0.0309, 0.0392],
    ]
)
#: the portfolio mean range used by the papers (about the minimum-variance mean up to the top asset mean).
DEFAULT_MU_MIN = 0.0526
DEFAULT_MU_MAX = 0.0886
DEFAULT_K = 15


def frontier_coefficients(means: Sequence[float] | np.ndarray, cov: np.ndarray) -> tuple[float, float, float]:
    """Coefficients ``(a, b, c)`` of the efficient frontier ``sigma(mu) = sqrt(a mu^2 + b mu + c)``.

    Merton (1972): with ``o`` a vector of ones, ``k = m' S^-1 o``, ``l = m' S^-1 m``,
    ``p = o' S^-1 o``, ``g = (l S^-1 o - k S^-1 m) / (lp - k^2)``,
    ``h = (p S^-1 m - k S^-1 o) / (lp - k^2)``; then ``a = h' S h``, ``b = 2 g' S h``,
    ``c = g' S g``. Short sales are allowed.

    :param means: expected annual asset returns ``m``, shape ``(n,)``, ``n >= 2``.
    :param cov: annual covariance ``S``, shape ``(n, n)``, symmetric positive definite.
    """
    m = np.asarray(means, dtype=np.float64)
    s = np.asarray(cov, dtype=np.float64)
    if m.ndim != 1 or len(m) < 2:
        raise ValueError(f"means must be a vector of at least 2 assets, got shape {m.shape}")
    if s.shape != (len(m), len(m)):
        raise ValueError(f"cov must have shape {(len(m), len(m))}, got {s.shape}")
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(s))):
        raise ValueError("means and cov must be finite")
    if not np.allclose(s, s.T):
        raise ValueError("cov must be symmetric")
    if np.linalg.eigvalsh(s).min() <= 0:
        raise ValueError("cov must be positive definite")
    ones = np.ones(len(m))
    s_inv_o = np.linalg.solve(s, ones)
    s_inv_m = np.linalg.solve(s, m)
    k = m @ s_inv_o
    l_ = m @ s_inv_m
    p = ones @ s_inv_o
    det = l_ * p - k * k
    if det <= 0:
        raise ValueError("means must not all be equal (the frontier is degenerate)")
    g = (l_ * s_inv_o - k * s_inv_m) / det
    h = (p * s_inv_m - k * s_inv_o) / det
    return float(h @ s @ h), float(2.0 * g @ s @ h), float(g @ s @ g)


@dataclass(frozen=True, eq=False)
class Frontier:
    """The ``K`` portfolios an investor chooses from, by annual mean and volatility.

    Portfolios are ordered as given (from :meth:`from_assets`: increasing mean and risk),
    so portfolio 0 is the most conservative.

    :param mu: expected annual (arithmetic) returns, shape ``(K,)``.
    :param sigma: annual volatilities, shape ``(K,)``, all ``> 0``.
    """

    mu: np.ndarray
    sigma: np.ndarray

    def __post_init__(self) -> None:
        mu = np.array(self.mu, dtype=np.float64).reshape(-1)
        sigma = np.array(self.sigma, dtype=np.float64).reshape(-1)
        if len(mu) == 0:
            raise ValueError("Frontier.mu must hold at least one portfolio")
        if len(sigma) != len(mu):
            raise ValueError(f"Frontier.sigma has {len(sigma)} entries but Frontier.mu has {len(mu)}")
        if not np.all(np.isfinite(mu)):
            raise ValueError("Frontier.mu must be finite")
        if not (np.all(np.isfinite(sigma)) and np.all(sigma > 0)):
            raise ValueError(f"Frontier.sigma must be finite and > 0, got {sigma.tolist()}")
        mu.setflags(write=False)
        sigma.setflags(write=False)
        object.__setattr__(self, "mu", mu)
        object.__setattr__(self, "sigma", sigma)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frontier):
            return NotImplemented
        return np.array_equal(self.mu, other.mu) and np.array_equal(self.sigma, other.sigma)

    def __hash__(self) -> int:
        return hash((self.mu.tobytes(), self.sigma.tobytes()))

    @property
    def k(self) -> int:
        """Number of portfolios."""
        return len(self.mu)

    @property
    def drift(self) -> np.ndarray:
        """Mean annual log return ``mu - sigma^2 / 2`` of each portfolio."""
        return self.mu - 0.5 * self.sigma**2

    @classmethod
    def from_assets(
        cls,
        means: Sequence[float] | np.ndarray,
        cov: np.ndarray,
        k: int = DEFAULT_K,
        mu_min: float = DEFAULT_MU_MIN,
        mu_max: float = DEFAULT_MU_MAX,
    ) -> Frontier:
        """``k`` equally spaced means from ``mu_min`` to ``mu_max`` on the assets' efficient frontier.

        :param means: asset mean returns.
        :param cov: asset covariance.
        :param k: number of portfolios (``k = 1`` gives the single portfolio at ``mu_min``).
        :param mu_min: mean of the most conservative portfolio (keep it at or above the
            minimum-variance mean ``-b / 2a`` so every portfolio is efficient).
        :param mu_max: mean of the most aggressive portfolio.
        """
        if int(k) != k or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k}")
        if not mu_min <= mu_max:
            raise ValueError(f"mu_min ({mu_min}) must not exceed mu_max ({mu_max})")
        a, b, c = frontier_coefficients(means, cov)
        mu = np.linspace(mu_min, mu_max, int(k))
        return cls(mu, np.sqrt(a * mu**2 + b * mu + c))

    @classmethod
    def from_portfolios(cls, portfolios: Sequence[tuple[float, float]]) -> Frontier:
        """An explicit list of ``(mu, sigma)`` portfolios."""
        arr = np.asarray(portfolios, dtype=np.float64).reshape(-1, 2)
        return cls(arr[:, 0], arr[:, 1])

    @classmethod
    def default(cls) -> Frontier:
        """The papers' 15 portfolios on the three-asset frontier, mu from 0.0526 to 0.0886."""
        return cls.from_assets(DEFAULT_MEANS, DEFAULT_COV)


@dataclass(frozen=True)
class Goal:
    """A goal due at year ``time``, offered at one or more levels ``(cost, utility)``.

    A partial goal (Das et al. 2022) is a cheaper level with less utility; at most one
    level is taken. Costs are in the same units as wealth.

    :param time: year the goal falls due, ``0 .. T``.
    :param levels: ``((cost, utility), ...)``, at least one; costs and utilities ``>= 0``.
    """

    time: int
    levels: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        if isinstance(self.time, bool) or int(self.time) != self.time:
            raise ValueError(f"Goal.time must be an integer, got {self.time!r}")
        try:
            levels = tuple((float(c), float(u)) for c, u in self.levels)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"Goal.levels must be (cost, utility) pairs, got {self.levels!r}") from exc
        if not levels:
            raise ValueError("Goal.levels must hold at least one (cost, utility) level")
        for cost, utility in levels:
            if not (math.isfinite(cost) and cost >= 0):
                raise ValueError(f"Goal.levels cost must be finite and >= 0, got {cost}")
            if not (math.isfinite(utility) and utility >= 0):
                raise ValueError(f"Goal.levels utility must be finite and >= 0, got {utility}")
        object.__setattr__(self, "time", int(self.time))
        object.__setattr__(self, "levels", levels)

    @classmethod
    def single(cls, time: int, cost: float, utility: float = 1.0) -> Goal:
        """A goal with one level."""
        return cls(time, ((cost, utility),))


@dataclass(frozen=True)
class Problem:
    """One GBWM problem: horizon, starting wealth, goals, portfolios and infusions.

    :param T: horizon in years; decisions at ``t = 0 .. T-1``, goals may fall due at ``0 .. T``.
    :param W0: initial wealth, ``> 0``.
    :param goals: goals, at most one per year (merge same-year goals into levels); stored sorted.
    :param frontier: the portfolios to choose from.
    :param infusions: cash added at the start of each year ``t = 0 .. T-1`` after any goal is
        paid (length ``T``, each ``>= 0``); None means none.
    """

    T: int
    W0: float
    goals: tuple[Goal, ...] = ()
    frontier: Frontier = field(default_factory=Frontier.default)
    infusions: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.T, bool) or int(self.T) != self.T or self.T < 1:
            raise ValueError(f"Problem.T must be an integer >= 1, got {self.T!r}")
        T = int(self.T)
        w0 = float(self.W0)
        if not (math.isfinite(w0) and w0 > 0):
            raise ValueError(f"Problem.W0 (initial wealth) must be finite and > 0, got {self.W0}")
        if not isinstance(self.frontier, Frontier):
            raise ValueError(f"Problem.frontier must be a Frontier, got {type(self.frontier).__name__}")
        goals = tuple(self.goals)
        for i, g in enumerate(goals):
            if not isinstance(g, Goal):
                raise ValueError(f"Problem.goals[{i}] must be a Goal, got {type(g).__name__}")
            if not 0 <= g.time <= T:
                raise ValueError(f"Problem.goals[{i}].time = {g.time} is outside [0, T={T}]")
        goals = tuple(sorted(goals, key=lambda g: g.time))
        times = [g.time for g in goals]
        if len(set(times)) != len(times):
            raise ValueError(
                f"Problem.goals has two goals in one year (times {times}); merge them into one goal's levels"
            )
        if self.infusions is None:
            infusions = (0.0,) * T
        else:
            infusions = tuple(float(x) for x in self.infusions)
            if len(infusions) != T:
                raise ValueError(f"Problem.infusions must have length T={T}, got {len(infusions)}")
            if not all(math.isfinite(x) and x >= 0 for x in infusions):
                raise ValueError(f"Problem.infusions must be finite and >= 0, got {list(infusions)}")
        object.__setattr__(self, "T", T)
        object.__setattr__(self, "W0", w0)
        object.__setattr__(self, "goals", goals)
        object.__setattr__(self, "infusions", infusions)

    # ------------------------------------------------------------- lookups
    @property
    def max_levels(self) -> int:
        """Most levels any goal has (0 without goals)."""
        return max((len(g.levels) for g in self.goals), default=0)

    @property
    def n_options(self) -> int:
        """Goal choices in a year: 0 = take nothing, ``1 .. max_levels`` = that level."""
        return 1 + self.max_levels

    @property
    def k(self) -> int:
        """Number of portfolios."""
        return self.frontier.k

    @cached_property
    def option_cost(self) -> np.ndarray:
        """``(T+1, n_options)`` cost of each goal choice by year; ``inf`` where a level does not exist."""
        out = np.full((self.T + 1, self.n_options), np.inf)
        out[:, 0] = 0.0
        for g in self.goals:
            out[g.time, 1 : len(g.levels) + 1] = [c for c, _ in g.levels]
        out.setflags(write=False)
        return out

    @cached_property
    def option_utility(self) -> np.ndarray:
        """``(T+1, n_options)`` utility of each goal choice by year (0 where none)."""
        out = np.zeros((self.T + 1, self.n_options))
        for g in self.goals:
            out[g.time, 1 : len(g.levels) + 1] = [u for _, u in g.levels]
        out.setflags(write=False)
        return out

    @cached_property
    def goal_index(self) -> np.ndarray:
        """``(T+1,)`` index into :attr:`goals` of the goal due each year, -1 where none."""
        out = np.full(self.T + 1, -1, dtype=np.int64)
        for i, g in enumerate(self.goals):
            out[g.time] = i
        out.setflags(write=False)
        return out

    @cached_property
    def infusion(self) -> np.ndarray:
        """``(T+1,)`` infusions with 0 at ``T``."""
        out = np.zeros(self.T + 1)
        out[: self.T] = self.infusions
        out.setflags(write=False)
        return out

    @property
    def max_utility(self) -> float:
        """Utility of taking every goal at its best level (an upper bound on the value)."""
        return float(sum(max(u for _, u in g.levels) for g in self.goals))

    @property
    def is_single_goal(self) -> bool:
        """One goal, one level, due at ``T``: the value is ``utility * P(W_T >= cost)``."""
        return len(self.goals) == 1 and self.goals[0].time == self.T and len(self.goals[0].levels) == 1

    def terminal_choice(self, wealth: np.ndarray, price_index: np.ndarray | None = None) -> np.ndarray:
        """Best affordable level of the goal due at ``T`` (0 = none) for each wealth.

        :param wealth: wealth on reaching ``T``.
        :param price_index: optional price index at ``T`` per wealth (:class:`Inflation`):
            level costs are multiplied by it; None means costs as listed.
        """
        wealth = np.asarray(wealth, dtype=np.float64)
        costs, utils = self.option_cost[self.T], self.option_utility[self.T]
        costs = costs[None, :]
        if price_index is not None:
            costs = costs * np.asarray(price_index, dtype=np.float64).reshape(-1, 1)
        value = np.where(costs <= wealth.reshape(-1, 1), utils[None, :], -np.inf)
        return value.argmax(axis=1).reshape(wealth.shape)


# ------------------------------------------------------------------ problems
def benchmark_problem(n_goals: int, T: int = 16, frontier: Frontier | None = None) -> Problem:
    """The multi-goal family of the GBWM RL papers (Das et al. 2024), in units of $10k.

    ``n_goals`` goals evenly spaced over ``T`` years (4 goals over 16 years: years 4, 8,
    12, 16); the goal at year ``t`` costs ``10 * 1.08**t`` and has utility ``10 + t``;
    ``W0 = 12 * n_goals**0.85``; no infusions; the default frontier.

    :param n_goals: number of goals; must divide ``T`` (1, 2, 4, 8 or 16 for ``T = 16``).
    :param T: horizon in years.
    """
    if int(n_goals) != n_goals or n_goals < 1 or T % n_goals:
        raise ValueError(f"n_goals must be a positive divisor of T={T}, got {n_goals}")
    n_goals = int(n_goals)
    step = T // n_goals
    goals = tuple(Goal.single(t, 10.0 * 1.08**t, 10.0 + t) for t in range(step, T + 1, step))
    return Problem(T, 12.0 * n_goals**0.85, goals, frontier or Frontier.default())


#: ranges of :func:`sample_problem` (documented in ``docs/wealth.md``).
SAMPLE_T = (10, 20)
SAMPLE_MAX_GOALS = 16
SAMPLE_PARTIAL_PROB = 0.3


def sample_problem(
    rng: np.random.Generator, max_levels: int = 2, mean_shift: float = 0.0, vol_scale: float = 1.0
) -> Problem:
    """A random problem around the benchmark family, for meta-RL pretraining.

    - ``T`` uniform on 10 .. 20; number of goals uniform on ``1 .. min(T, 16)``, at distinct
      years drawn uniformly from ``1 .. T``.
    - A goal at ``t`` costs ``10 * 1.08**t * LogNormal(0, 0.25)`` with utility
      ``(10 + t) * U(0.5, 1.5)``; with probability 0.3 (when ``max_levels >= 2``) it also
      has a partial level costing ``U(0.4, 0.7)`` of the full cost for ``U(0.3, 0.6)`` of
      the full utility (listed first, so levels go cheap to dear).
    - ``W0 = 12 * n_goals**0.85 * LogNormal(0, 0.3)``.
    - Infusions: none with probability 0.5, else a constant ``U(0, 0.1) * W0`` a year over
      the first ``U{1..T}`` years.
    - Frontier: the default 15 portfolios with every mean scaled by ``U(0.75, 1.25)`` and
      every volatility by ``U(0.75, 1.25)`` (one factor each, so the frontier keeps its shape).

    :param rng: source of randomness.
    :param max_levels: most levels a goal may have (1 disables partial goals).
    :param mean_shift: added to every drawn portfolio's mean return (a market regime for stress tests;
        the draws, and so the problem otherwise, are the same).
    :param vol_scale: multiplies every drawn portfolio's volatility (likewise).
    """
    T = int(rng.integers(SAMPLE_T[0], SAMPLE_T[1] + 1))
    n_goals = int(rng.integers(1, min(T, SAMPLE_MAX_GOALS) + 1))
    times = np.sort(rng.choice(np.arange(1, T + 1), size=n_goals, replace=False))
    goals = []
    for t in times:
        cost = 10.0 * 1.08**t * rng.lognormal(0.0, 0.25)
        utility = (10.0 + t) * rng.uniform(0.5, 1.5)
        levels = [(cost, utility)]
        if max_levels >= 2 and rng.random() < SAMPLE_PARTIAL_PROB:
            levels.insert(0, (cost * rng.uniform(0.4, 0.7), utility * rng.uniform(0.3, 0.6)))
        goals.append(Goal(int(t), tuple(levels)))
    w0 = 12.0 * n_goals**0.85 * rng.lognormal(0.0, 0.3)
    infusions = np.zeros(T)
    if rng.random() >= 0.5:
        infusions[: int(rng.integers(1, T + 1))] = rng.uniform(0.0, 0.1) * w0
    base = Frontier.default()
    mu, sigma = base.mu * rng.uniform(0.75, 1.25), base.sigma * rng.uniform(0.75, 1.25)
    frontier = Frontier(mu + mean_shift, sigma * vol_scale)
    return Problem(T, w0, tuple(goals), frontier, tuple(infusions))


# ------------------------------------------------------------------ inflation
@dataclass(frozen=True)
class Inflation:
    """Stochastic inflation of goal costs: a price index ``P_t`` multiplies every goal cost.

    ``P_0 = 1``; each year, after the market move, the log inflation rate follows an AR(1)
    around ``mean`` and the index compounds it::

        pi_t    = mean + rho * (pi_{t-1} - mean) + vol * e_t,   e_t ~ N(0, 1),  pi_{-1} = mean
        P_{t+1} = P_t * exp(pi_t)

    A goal level listed at cost ``c`` and due at year ``t`` costs ``c * P_t`` (the
    listed costs are in year-0 prices). ``vol = 0`` gives ``P_t = exp(mean * t)``.
    ``(P_t, pi_{t-1})`` is extra state (``pi_{t-1}`` matters only when ``rho != 0``);
    :mod:`fieldrl.simulators.gbwm.dp` does not model it, so there is no DP optimum.

    :param mean: long-run mean of the annual log inflation rate (0.025 = about 2.5 % a year).
    :param vol: standard deviation of the annual innovation ``vol * e_t``, ``>= 0``.
    :param rho: persistence of the inflation rate, ``-1 < rho < 1`` (0: independent years).
    """

    mean: float = 0.025
    vol: float = 0.01
    rho: float = 0.0

    def __post_init__(self) -> None:
        for name in ("mean", "vol", "rho"):
            value = float(getattr(self, name))
            if not math.isfinite(value):
                raise ValueError(f"Inflation.{name} must be finite, got {value}")
            object.__setattr__(self, name, value)
        if self.vol < 0:
            raise ValueError(f"Inflation.vol must be >= 0, got {self.vol}")
        if not -1.0 < self.rho < 1.0:
            raise ValueError(f"Inflation.rho must lie in (-1, 1), got {self.rho}")

    def next_rate(self, rate: np.ndarray, e: np.ndarray) -> np.ndarray:
        """This year's log inflation rate ``pi_t`` from last year's ``pi_{t-1}`` and the shock ``e_t``."""
        return self.mean + self.rho * (rate - self.mean) + self.vol * e


# ------------------------------------------------------------------ engine
class WealthBatch:
    """``n`` investors facing the same problem, each at its own year, stepped together.

    Public arrays (one entry per investor): ``wealth`` (current, before this year's goal),
    ``t`` (years elapsed), ``utility`` (collected so far), ``goals_taken`` ``(n, n_goals)``
    (level taken, 1-based; 0 = not taken), ``done``, ``terminal_wealth`` (wealth on reaching
    ``T``, before the terminal goal; NaN before then), ``price_index`` (``P_t``, 1 without
    inflation) and ``inflation_rate`` (last year's ``pi_{t-1}``; the mean at ``t = 0``).

    :param problem: the problem every investor faces.
    :param n: number of investors.
    :param inflation: optional stochastic inflation of goal costs; then :meth:`step` needs
        the inflation shocks ``e`` as well. None (default): costs as listed.
    """

    def __init__(self, problem: Problem, n: int, inflation: Inflation | None = None):
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if inflation is not None and not isinstance(inflation, Inflation):
            raise ValueError(f"inflation must be an Inflation or None, got {type(inflation).__name__}")
        self.problem = problem
        self.inflation = inflation
        self.n = int(n)
        self.price_index = np.ones(self.n)
        self.inflation_rate = np.full(self.n, inflation.mean if inflation is not None else 0.0)
        self.wealth = np.full(self.n, problem.W0)
        self.t = np.zeros(self.n, dtype=np.int64)
        self.utility = np.zeros(self.n)
        self.goals_taken = np.zeros((self.n, len(problem.goals)), dtype=np.int64)
        self.done = np.zeros(self.n, dtype=bool)
        self.terminal_wealth = np.full(self.n, np.nan)
        self._rows = np.arange(self.n)
        self._drift = problem.frontier.drift
        self._sigma = problem.frontier.sigma

    def reset(self, idx: Sequence[int] | np.ndarray | None = None) -> None:
        """Restart investors ``idx`` (all when None) at ``W0`` in year 0."""
        idx = self._rows if idx is None else np.asarray(idx, dtype=np.int64).reshape(-1)
        self.wealth[idx] = self.problem.W0
        self.t[idx] = 0
        self.utility[idx] = 0.0
        self.goals_taken[idx] = 0
        self.done[idx] = False
        self.terminal_wealth[idx] = np.nan
        self.price_index[idx] = 1.0
        self.inflation_rate[idx] = self.inflation.mean if self.inflation is not None else 0.0

    def option_costs(self) -> np.ndarray:
        """``(n, n_options)`` cost of each goal choice this year, at today's prices (``inf``: none)."""
        costs = self.problem.option_cost[self.t]
        if self.inflation is not None:
            costs = costs * self.price_index[:, None]
        return costs

    def feasible(self) -> np.ndarray:
        """``(n, n_options)`` mask of goal choices available and affordable this year."""
        return self.option_costs() <= self.wealth[:, None]

    def step(
        self,
        option: np.ndarray,
        portfolio: np.ndarray,
        z: np.ndarray,
        active: np.ndarray | None = None,
        e: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One year for every active investor that is not done.

        A goal choice that does not exist this year or is not affordable counts as "take
        nothing". On reaching ``T`` the best affordable level of the goal due at ``T`` is taken.
        With inflation, goal costs are paid at this year's price index, which then moves on
        (after the market) to next year's.

        :param option: ``(n,)`` goal choice (0 = none, ``i`` = level ``i``).
        :param portfolio: ``(n,)`` portfolio index, clipped into ``0 .. K-1``.
        :param z: ``(n,)`` standard normal draws of this year's market.
        :param active: optional ``(n,)`` mask; others are left unchanged with reward 0.
        :param e: ``(n,)`` standard normal inflation shocks; required with inflation, else ignored.
        :return: ``reward`` (utility gained this step, ``(n,)``) and ``done`` ``(n,)``.
        """
        p = self.problem
        live = ~self.done if active is None else (~self.done & np.asarray(active, dtype=bool))
        opt = np.clip(np.asarray(option, dtype=np.int64).reshape(self.n), 0, p.n_options - 1)
        k = np.clip(np.asarray(portfolio, dtype=np.int64).reshape(self.n), 0, p.k - 1)
        z = np.asarray(z, dtype=np.float64).reshape(self.n)
        if self.inflation is not None and e is None:
            raise ValueError("this batch has inflation: step() needs e, the (n,) inflation shocks")
        t = self.t
        cost = p.option_cost[t, opt]
        if self.inflation is not None:
            cost = cost * self.price_index
        ok = live & (cost <= self.wealth)
        opt = np.where(ok, opt, 0)
        cost = np.where(ok, cost, 0.0)
        reward = np.where(ok, p.option_utility[t, opt], 0.0)
        self._record(t, opt, ok & (opt > 0))

        grown = (self.wealth - cost + p.infusion[t]) * np.exp(self._drift[k] + self._sigma[k] * z)
        self.wealth = np.where(live, np.maximum(grown, 0.0), self.wealth)
        self.t = np.where(live, t + 1, t)
        index = None
        if self.inflation is not None:
            rate = self.inflation.next_rate(
                self.inflation_rate, np.asarray(e, dtype=np.float64).reshape(self.n)
            )
            self.price_index = np.where(live, self.price_index * np.exp(rate), self.price_index)
            self.inflation_rate = np.where(live, rate, self.inflation_rate)
            index = self.price_index

        end = live & (self.t >= p.T)
        if end.any():
            self.terminal_wealth = np.where(end, self.wealth, self.terminal_wealth)
            level = p.terminal_choice(self.wealth, index)
            take = end & (level > 0)
            reward = reward + np.where(take, p.option_utility[p.T, level], 0.0)
            paid = p.option_cost[p.T, level] if index is None else p.option_cost[p.T, level] * index
            self.wealth = np.where(take, self.wealth - paid, self.wealth)
            self._record(np.full(self.n, p.T), level, take)
            self.done |= end
        self.utility += reward
        return reward, end

    def _record(self, t: np.ndarray, level: np.ndarray, mask: np.ndarray) -> None:
        gi = self.problem.goal_index[t]
        rows = np.flatnonzero(mask & (gi >= 0))
        self.goals_taken[rows, gi[rows]] = level[rows]


@dataclass
class SimResult:
    """Outcome of :func:`simulate`, one row per path.

    :param utility: total utility collected ``(n,)``.
    :param goals_taken: ``(n, n_goals)`` level taken of each goal (0 = not taken).
    :param wealth: ``(n, T+1)`` wealth at the start of each year, before that year's goal
        (column ``T`` before the terminal goal).
    :param final_wealth: ``(n,)`` wealth left after the terminal goal.
    :param options: ``(n, T)`` goal choices actually made (after the feasibility check).
    :param portfolios: ``(n, T)`` portfolios chosen.
    :param price_index: ``(n, T+1)`` price index at the start of each year (with inflation;
        None without).
    """

    utility: np.ndarray
    goals_taken: np.ndarray
    wealth: np.ndarray
    final_wealth: np.ndarray
    options: np.ndarray
    portfolios: np.ndarray
    price_index: np.ndarray | None = None

    @property
    def mean_utility(self) -> float:
        return float(self.utility.mean())

    @property
    def stderr(self) -> float:
        """Standard error of :attr:`mean_utility`."""
        n = len(self.utility)
        return float(self.utility.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0


PolicyFn = Callable[[int, np.ndarray], tuple[np.ndarray, np.ndarray]]


def simulate(
    problem: Problem,
    policy_fn: PolicyFn,
    n_paths: int,
    rng: np.random.Generator | None = None,
    z: np.ndarray | None = None,
    inflation: Inflation | None = None,
    e: np.ndarray | None = None,
) -> SimResult:
    """Monte Carlo of a policy over ``n_paths`` investors, all years in lockstep.

    :param problem: the problem.
    :param policy_fn: ``policy_fn(t, wealth) -> (options, portfolios)`` for the ``(n,)``
        current wealths in year ``t``; scalars broadcast. Infeasible choices mean "take nothing".
        (With inflation the policy does not see the price index; the result records it.)
    :param n_paths: number of paths.
    :param rng: generator for the market draws (ignored when ``z`` is given) and, with
        inflation, then for the inflation shocks (ignored when ``e`` is given).
    :param z: optional ``(n_paths, T)`` standard normal draws (common random numbers).
    :param inflation: optional stochastic inflation of goal costs (:class:`Inflation`).
    :param e: optional ``(n_paths, T)`` standard normal inflation shocks.
    """
    rng = rng if rng is not None else (np.random.default_rng() if z is None or e is None else None)
    if z is None:
        z = rng.standard_normal((n_paths, problem.T))
    z = np.asarray(z, dtype=np.float64)
    if z.shape != (n_paths, problem.T):
        raise ValueError(f"z must have shape {(n_paths, problem.T)}, got {z.shape}")
    if inflation is not None:
        if e is None:
            e = rng.standard_normal((n_paths, problem.T))
        e = np.asarray(e, dtype=np.float64)
        if e.shape != (n_paths, problem.T):
            raise ValueError(f"e must have shape {(n_paths, problem.T)}, got {e.shape}")
    batch = WealthBatch(problem, n_paths, inflation)
    index = np.ones((n_paths, problem.T + 1)) if inflation is not None else None
    wealth = np.empty((n_paths, problem.T + 1))
    options = np.zeros((n_paths, problem.T), dtype=np.int64)
    portfolios = np.zeros((n_paths, problem.T), dtype=np.int64)
    for t in range(problem.T):
        wealth[:, t] = batch.wealth
        if index is not None:
            index[:, t] = batch.price_index
        opt, k = policy_fn(t, batch.wealth.copy())
        opt = np.broadcast_to(np.asarray(opt, dtype=np.int64), (n_paths,))
        k = np.broadcast_to(np.asarray(k, dtype=np.int64), (n_paths,))
        feasible = batch.feasible()
        opt = np.clip(opt, 0, problem.n_options - 1)
        options[:, t] = np.where(feasible[np.arange(n_paths), opt], opt, 0)
        portfolios[:, t] = np.clip(k, 0, problem.k - 1)
        batch.step(options[:, t], portfolios[:, t], z[:, t], e=None if e is None else e[:, t])
    wealth[:, problem.T] = batch.terminal_wealth
    if index is not None:
        index[:, problem.T] = batch.price_index
    return SimResult(
        batch.utility.copy(),
        batch.goals_taken.copy(),
        wealth,
        batch.wealth.copy(),
        options,
        portfolios,
        index,
    )
