"""Baseline investment rules for the wealth (GBWM) domain, batched, behind the Policy protocol.

Every rule reads only the observation of :mod:`fieldrl.domains.wealth.env` (year, wealth
relative to ``W0``, the next goals with their costs relative to ``W0``); actions are
``(n_envs, 2)`` int64 ``[goal choice, portfolio]``. Portfolio 0 is the most conservative,
``K-1`` the most aggressive.

``dp`` is the dynamic-programming optimum (:func:`fieldrl.simulators.gbwm.dp.solve`). It
also needs the problem definition (all goals, infusions, the frontier), which is public
to an adviser but not fully in the observation. For a fixed problem it comes from the
scenario parameters; with ``random: true`` every held-out episode has its own problem,
and the wealth evaluation envs hand it over attached to the observation batch
(:class:`ProblemObs`, an ``ndarray`` whose ``problems`` attribute lists each row's problem).

With stochastic inflation of goal costs (``params.inflation``) the goal costs in the
observation are at today's prices, so the greedy rules compare wealth with the inflated
cost they actually face; ``dp`` does not apply (its solver has no price-index state) and
refuses to build rather than play a plan for the wrong problem.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Literal

import numpy as np
from pydantic import Field

from fieldrl.domains.base import HeuristicSpec, Settings
from fieldrl.domains.wealth.env import _HEAD
from fieldrl.domains.wealth.params import WealthParams, dp_memory_problem
from fieldrl.errors import FieldrlError
from fieldrl.policies.base import Policy
from fieldrl.simulators.gbwm.engine import Problem

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    from fieldrl.simulators.gbwm import dp as gbwm_dp

#: portfolios of random problems (``sample_problem`` keeps the default frontier's 15).
RANDOM_K = 15
#: observation columns (see ``fieldrl.domains.wealth.env``).
OBS_T, OBS_W, OBS_T_HORIZON = 0, 1, 4
GOAL_PRESENT, GOAL_DUE_IN, GOAL_LEVELS = 0, 1, 2

PortfolioName = Literal["conservative", "balanced", "aggressive"]
PortfolioChoice = PortfolioName | Annotated[int, Field(ge=0, le=99)]


class ProblemObs(np.ndarray):
    """An observation batch that also carries each row's :class:`Problem` (``problems``).

    Made by the wealth evaluation envs so that ``dp`` can solve the problem behind each row.
    ``np.asarray(obs)`` gives the plain array, so other policies never see the difference.
    """

    problems: tuple[Problem, ...] = ()

    @classmethod
    def wrap(cls, obs: np.ndarray, problems: tuple[Problem, ...]) -> ProblemObs:
        out = np.asarray(obs).view(cls)
        out.problems = problems
        return out

    def __array_finalize__(self, obj: object) -> None:
        self.problems = getattr(obj, "problems", ())


def dp_solution(problem: Problem, grid_density: float | None = None) -> gbwm_dp.DPSolution:
    """The DP solution of ``problem``, cached (problems are immutable and hashable).

    :param grid_density: None (the reference for ``dp`` and ``pct_of_dp``): grids refined until
        ``V(0, W0)`` changes by at most 0.1 % (:func:`gbwm_dp.solve_converged`); a number: one grid
        of that density with exact transition rows (1 = the paper's grid, up to ~1.5 % low on
        multi-goal problems; see docs/wealth.md).
    """
    return _cached_solution(problem, None if grid_density is None else float(grid_density))


@lru_cache(maxsize=128)
def _cached_solution(problem: Problem, grid_density: float | None) -> gbwm_dp.DPSolution:
    from fieldrl.simulators.gbwm import dp as gbwm_dp

    if grid_density is None:
        return gbwm_dp.solve_converged(problem)
    return gbwm_dp.solve(problem, grid_density=grid_density)


def action_sizes(params: WealthParams) -> tuple[int, int]:
    """``(goal choices, portfolios)`` of the env built from ``params`` (as ``WealthEnv`` sizes them)."""
    problem = params.problem()
    if problem is None:
        return 1 + params.max_levels, RANDOM_K
    return 1 + max(params.max_levels, problem.max_levels), problem.k


# ----------------------------------------------------------------------------- settings


class FixedSettings(Settings):
    portfolio: PortfolioChoice = Field(
        "balanced",
        description="conservative (lowest risk), balanced (middle), aggressive (highest risk), "
        "or a portfolio index 0..K-1.",
    )
    goals: Literal["greedy", "none"] = Field(
        "greedy", description="greedy: take every affordable goal at its best affordable level; none: never."
    )


class GreedySettings(Settings):
    portfolio: PortfolioChoice = Field(
        "balanced", description="Portfolio held every year (a name or an index 0..K-1)."
    )


class GlideSettings(Settings):
    target: Literal["horizon", "next-goal"] = Field(
        "next-goal", description="Date the glide path aims at: the next goal due, or the horizon T."
    )
    span: float = Field(
        10.0, gt=0.0, le=100.0, description="Years before the target over which risk is cut back."
    )
    start: PortfolioChoice = Field("aggressive", description="Portfolio far from the target.")
    end: PortfolioChoice = Field("conservative", description="Portfolio at the target.")


class DPSettings(Settings):
    grid_density: float | None = Field(
        None,
        ge=0.25,
        le=10.0,
        description="Grid points per sigma_min. Unset (default): grids refined until the DP value "
        "changes by at most 0.1 %, the reference pct_of_dp uses; 1 = the paper's coarser grid.",
    )


def portfolio_index(choice: PortfolioName | int, k: int) -> int:
    """Index of a named portfolio on a ``k``-portfolio frontier (an index must lie in ``0..k-1``)."""
    if isinstance(choice, str):
        return {"conservative": 0, "balanced": (k - 1) // 2, "aggressive": k - 1}[choice]
    if not 0 <= choice < k:
        raise ValueError(f"portfolio index {choice} is outside 0..{k - 1}")
    return int(choice)


# ----------------------------------------------------------------------------- rules


def greedy_goal(obs: np.ndarray, n_options: int) -> np.ndarray:
    """Goal choice taking the goal due now at its highest-utility affordable level (0 = none).

    Reads the first goal block: present, due in 0 years, levels ``(cost/W0, utility/20)``
    against the wealth ``W/W0``. Levels missing from the block read as utility 0 and are
    never taken. With inflation the block's costs are already at today's prices.
    """
    obs = np.asarray(obs, dtype=np.float64)
    n = len(obs)
    levels = n_options - 1
    block = obs[:, _HEAD : _HEAD + 2 + 2 * levels]
    due = (block[:, GOAL_PRESENT] > 0.5) & (np.abs(block[:, GOAL_DUE_IN]) < 1e-6)
    costs = block[:, GOAL_LEVELS::2][:, :levels]
    utils = block[:, GOAL_LEVELS + 1 :: 2][:, :levels]
    value = np.where(costs <= obs[:, [OBS_W]], utils, 0.0)
    best = value.argmax(axis=1)
    take = due & (value[np.arange(n), best] > 0)
    return np.where(take, best + 1, 0).astype(np.int64)


def years_to_next_goal(obs: np.ndarray, max_obs_goals: int, levels: int) -> np.ndarray:
    """Years from now to the first goal due strictly after this year (inf when none is left)."""
    obs = np.asarray(obs, dtype=np.float64)
    horizon = obs[:, OBS_T_HORIZON] * 20.0
    block = 2 + 2 * levels
    out = np.full(len(obs), np.inf)
    for g in range(max_obs_goals - 1, -1, -1):  # the earliest later goal wins
        start = _HEAD + g * block
        present = obs[:, start + GOAL_PRESENT] > 0.5
        years = obs[:, start + GOAL_DUE_IN] * horizon
        out = np.where(present & (years > 0.5), years, out)
    return out


class _Rule(Policy):
    """Shared plumbing: a name, the action sizes and a stateless ``reset``."""

    def __init__(self, name: str, n_options: int, k: int):
        self.name, self.n_options, self.k = name, int(n_options), int(k)

    def reset(self, n_envs: int) -> None:
        pass

    def _actions(self, goals: np.ndarray, portfolios: np.ndarray) -> np.ndarray:
        return np.stack([goals, portfolios], axis=1).astype(np.int64)


class FixedPortfolio(_Rule):
    """The same portfolio every year; goals taken greedily (or never)."""

    def __init__(self, name: str, n_options: int, k: int, portfolio: int, greedy: bool = True):
        super().__init__(name, n_options, k)
        self.portfolio, self.greedy = int(portfolio), bool(greedy)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        n = len(obs)
        goals = greedy_goal(obs, self.n_options) if self.greedy else np.zeros(n, dtype=np.int64)
        return self._actions(goals, np.full(n, self.portfolio))


class GlidePath(_Rule):
    """Target-date fund: risk falls linearly from ``start`` to ``end`` over the last ``span`` years.

    ``portfolio = end + (start - end) * min(1, years_left / span)``, rounded, where
    ``years_left`` counts to the next goal due after this year (``next-goal``; after the
    last goal, ``end``) or to the horizon. Goals are taken greedily.
    """

    def __init__(
        self, name: str, n_options: int, k: int, start: int, end: int, span: float, target: str, goals: int
    ):
        super().__init__(name, n_options, k)
        self.start, self.end, self.span, self.target = int(start), int(end), float(span), target
        self.max_obs_goals = int(goals)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float64)
        horizon = obs[:, OBS_T_HORIZON] * 20.0
        if self.target == "horizon":
            left = horizon * (1.0 - obs[:, OBS_T])
        else:
            left = years_to_next_goal(obs, self.max_obs_goals, self.n_options - 1)
            left = np.where(np.isfinite(left), left, 0.0)
        frac = np.clip(left / self.span, 0.0, 1.0)
        portfolios = np.rint(self.end + (self.start - self.end) * frac).astype(np.int64)
        return self._actions(greedy_goal(obs, self.n_options), np.clip(portfolios, 0, self.k - 1))


class DynamicProgramming(_Rule):
    """The DP-optimal policy of each env's problem (solved once per problem, then cached).

    The year and wealth come from the observation (``t/T`` and ``W/W0``); the problem from
    the scenario (fixed problem) or from the observation batch (:class:`ProblemObs`,
    random problems).
    """

    def __init__(
        self, name: str, n_options: int, k: int, problem: Problem | None, grid_density: float | None = None
    ):
        super().__init__(name, n_options, k)
        self.problem = problem
        self.grid_density = None if grid_density is None else float(grid_density)

    def _problems(self, obs: np.ndarray) -> tuple[Problem, ...]:
        if self.problem is not None:
            return (self.problem,) * len(obs)
        problems = getattr(obs, "problems", ())
        if len(problems) != len(obs):
            raise ValueError(
                "the dp heuristic on random problems needs the problem of every env; it is attached to the "
                "observations by the wealth domain's evaluation envs (ProblemObs), and these observations "
                "carry none"
            )
        return tuple(problems)

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        problems = self._problems(obs)
        x = np.asarray(obs, dtype=np.float64)
        goals = np.zeros(len(x), dtype=np.int64)
        portfolios = np.zeros(len(x), dtype=np.int64)
        groups: dict[int, list[int]] = {}
        for i, p in enumerate(problems):
            groups.setdefault(id(p), []).append(i)
        for rows in groups.values():
            p = problems[rows[0]]
            idx = np.asarray(rows)
            t = np.rint(x[idx, OBS_T] * p.T).astype(np.int64)
            wealth = x[idx, OBS_W] * p.W0
            goals[idx], portfolios[idx] = dp_solution(p, self.grid_density).act(t, wealth)
        return self._actions(goals, portfolios)


# ----------------------------------------------------------------------------- catalogue


def _fixed(s: FixedSettings, p: WealthParams, name: str) -> FixedPortfolio:
    n_options, k = action_sizes(p)
    return FixedPortfolio(name, n_options, k, portfolio_index(s.portfolio, k), s.goals == "greedy")


def _greedy(s: GreedySettings, p: WealthParams, name: str) -> FixedPortfolio:
    n_options, k = action_sizes(p)
    return FixedPortfolio(name, n_options, k, portfolio_index(s.portfolio, k), greedy=True)


def _glide(s: GlideSettings, p: WealthParams, name: str) -> GlidePath:
    n_options, k = action_sizes(p)
    start, end = portfolio_index(s.start, k), portfolio_index(s.end, k)
    return GlidePath(name, n_options, k, start, end, s.span, s.target, p.max_obs_goals)


def heuristic_problem(use: str, p: WealthParams) -> str | None:
    """Why heuristic ``use`` cannot run with params ``p`` (``WealthDomain.heuristic_problem``), or None."""
    if use == "dp" and p.inflation is not None:
        return (
            "does not apply with params.inflation: the DP optimum is not available under stochastic "
            "inflation of goal costs, whose price index is a state the DP solver does not model"
        )
    return None


def _dp(s: DPSettings, p: WealthParams, name: str) -> DynamicProgramming:
    refused = heuristic_problem("dp", p)
    if refused is not None:  # scenario validation refuses this first; a direct build still must not run
        raise FieldrlError(f"heuristic {name!r} (use: dp) {refused}; remove it or params.inflation")
    problem = p.problem()  # None: a new random problem every episode, each solved as it comes
    if s.grid_density is not None and problem is not None:  # the converged DP's: judged with the params
        memory = dp_memory_problem(problem, grid_density=s.grid_density)
        if memory is not None:  # a ValueError: scenario validation names the heuristic's settings
            raise ValueError(f"grid_density {s.grid_density}: {memory}")
    n_options, k = action_sizes(p)
    return DynamicProgramming(name, n_options, k, problem, s.grid_density)


HEURISTICS: dict[str, HeuristicSpec] = {
    "fixed-portfolio": HeuristicSpec(
        FixedSettings, _fixed, "The same portfolio every year; every affordable goal taken."
    ),
    "glide-path": HeuristicSpec(
        GlideSettings,
        _glide,
        "Target-date glide path: aggressive far from the next goal (or horizon), conservative near it.",
    ),
    "greedy-goals": HeuristicSpec(
        GreedySettings,
        _greedy,
        "Take every affordable goal at its best affordable level; hold one portfolio.",
    ),
    "dp": HeuristicSpec(
        DPSettings,
        _dp,
        "Dynamic-programming optimum of the problem (the reference for % of DP).",
        oracle=True,
    ),
}
