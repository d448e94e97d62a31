"""Gymnasium env of one GBWM investor, conditioned on a fixed-size problem description.

Action ``MultiDiscrete([n_options, K])``: goal choice (0 = none, ``i`` = level ``i``;
unavailable or unaffordable choices mean "take nothing") and portfolio. One step is one
year; the episode ends after ``T`` steps, when the goal due at ``T`` (if any) is settled
automatically. Reward: utility of the goals taken in the step.

Observation (float32), so one policy can serve many problems:
``[t/T, W/W0, ln(W0)/10, I_t/W0, T/20, mu_min, mu_max, sigma_min, sigma_max]`` followed by
``max_obs_goals`` blocks describing the next goals due at or after ``t``:
``[present, (time - t)/T, cost_1/W0, utility_1/20, ..., cost_L/W0, utility_L/20]``
(``L = max_levels``; missing entries 0). Ratios are clipped to ``[0, OBS_CLIP]``.

With stochastic inflation of goal costs (``inflation``), goal costs are shown at today's
prices (listed cost times the price index ``P_t``) and two entries are appended:
``[P_t, 10 * pi_{t-1}]`` (the index and last year's log inflation rate). Without
inflation the observation is exactly the one above.

With ``goal_gap`` (a learned policy's own choice) two more entries come last: see
:func:`append_goal_gap`.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from fieldrl.simulators.gbwm.engine import Inflation, Problem, WealthBatch, sample_problem

OBS_CLIP = 100.0
_HEAD = 9
#: entries appended with inflation: the price index and 10 x last year's log inflation rate.
PRICE_OBS = 2
#: scale of the inflation-rate entry.
RATE_SCALE = 10.0


#: entries appended with ``goal_gap``: the gap to the next goal in log wealth, and in volatilities.
GOAL_GAP_OBS = 2
#: the log-wealth gap is clipped to +-GAP_CLIP, the gap in volatilities to +-2 GAP_CLIP.
GAP_CLIP = 5.0


def observation_size(
    max_obs_goals: int, max_levels: int, inflation: bool = False, goal_gap: bool = False
) -> int:
    return (
        _HEAD
        + max_obs_goals * (2 + 2 * max_levels)
        + (PRICE_OBS if inflation else 0)
        + (GOAL_GAP_OBS if goal_gap else 0)
    )


def append_goal_gap(obs: np.ndarray) -> np.ndarray:
    """``(n, size)`` observations with the two ``goal_gap`` entries appended (float32).

    ``ln(W / c)``, with ``c`` the cost of the next goal's first level (at today's prices), clipped to
    ``+-GAP_CLIP``; and that gap over ``sigma_max * sqrt(years to the goal + 1)``, clipped to
    ``+-2 GAP_CLIP``; both 0 when no goal is ahead. Both are functions of entries already in the
    observation (wealth, the goal's cost and years, the horizon, the highest volatility), but a ReLU
    network approximates logs and ratios poorly, and the optimal portfolio of a single goal depends
    on wealth through this gap. What it gives PPO is measured in docs/wealth.md (about a point of DP,
    within the noise of two training seeds).
    """
    obs = np.asarray(obs, dtype=np.float64).reshape(len(obs), -1)
    wealth, ahead, cost = obs[:, 1], obs[:, _HEAD] > 0, obs[:, _HEAD + 2]
    years = obs[:, _HEAD + 1] * obs[:, 4] * 20.0  # (time - t) / T times T
    ok = ahead & (cost > 0)
    gap = np.log(np.maximum(wealth, 1e-6) / np.where(ok, cost, 1.0))
    gap = np.where(ok, np.clip(gap, -GAP_CLIP, GAP_CLIP), 0.0)
    spread = np.maximum(obs[:, 8], 1e-6) * np.sqrt(np.maximum(years, 0.0) + 1.0)
    scaled = np.clip(gap / spread, -2 * GAP_CLIP, 2 * GAP_CLIP)
    return np.concatenate([obs, np.stack([gap, scaled], axis=1)], axis=1).astype(np.float32)


def cost_columns(max_obs_goals: int, max_levels: int) -> np.ndarray:
    """Observation columns holding goal costs (``cost / W0``)."""
    block = 2 + 2 * max_levels
    return np.array(
        [_HEAD + g * block + 2 + 2 * j for g in range(max_obs_goals) for j in range(max_levels)],
        dtype=np.int64,
    )


def apply_prices(
    obs: np.ndarray, price_index: np.ndarray, rate: np.ndarray, max_obs_goals: int, max_levels: int
) -> np.ndarray:
    """Put unclipped ``(n, size)`` observations with listed costs at today's prices, in place.

    Multiplies the goal-cost columns by each row's price index and fills the two appended
    columns with ``P_t`` and ``10 * pi_{t-1}``. Clip afterwards.
    """
    index = np.asarray(price_index, dtype=np.float64).reshape(-1, 1)
    obs[:, cost_columns(max_obs_goals, max_levels)] *= index
    obs[:, -2] = index[:, 0]
    obs[:, -1] = RATE_SCALE * np.asarray(rate, dtype=np.float64).reshape(-1)
    return obs


def observe(
    problem: Problem,
    t: int,
    wealth: float,
    max_obs_goals: int,
    max_levels: int,
    price: tuple[float, float] | None = None,
    clip: bool = True,
) -> np.ndarray:
    """The observation vector of an investor with ``wealth`` at year ``t`` (see module doc).

    :param price: ``(P_t, pi_{t-1})`` with inflation (adds two entries); None without.
    :param clip: clip to ``[-OBS_CLIP, OBS_CLIP]`` and return float32 (False: raw float64).
    """
    f, w0, T = problem.frontier, problem.W0, problem.T
    head = [
        t / T,
        wealth / w0,
        math.log(w0) / 10.0,
        problem.infusion[min(t, T)] / w0,
        T / 20.0,
        f.mu.min(),
        f.mu.max(),
        f.sigma.min(),
        f.sigma.max(),
    ]
    block = 2 + 2 * max_levels
    goals = np.zeros(max_obs_goals * block)
    upcoming = [g for g in problem.goals if g.time >= t][:max_obs_goals]
    for i, g in enumerate(upcoming):
        row = [1.0, (g.time - t) / T]
        for cost, utility in g.levels[:max_levels]:
            row += [cost / w0, utility / 20.0]
        goals[i * block : i * block + len(row)] = row
    obs = np.concatenate([head, goals])
    if price is not None:
        obs = np.concatenate([obs, np.zeros(PRICE_OBS)])
        apply_prices(obs[None, :], np.array([price[0]]), np.array([price[1]]), max_obs_goals, max_levels)
    if not clip:
        return obs
    return np.clip(obs, -OBS_CLIP, OBS_CLIP).astype(np.float32)


class WealthEnv(gym.Env):
    """One investor on a fixed problem, or on a new random problem every episode.

    :param problem: the problem; None with ``random=True`` draws one per reset
        (:func:`fieldrl.simulators.gbwm.sample_problem`).
    :param random: draw a new problem at every reset.
    :param max_obs_goals: upcoming goals described in the observation.
    :param max_levels: goal levels offered by the action space (for a fixed problem, at
        least its own; for random problems, the sampler's maximum).
    :param k: portfolios (for a fixed problem, its frontier's; random problems have 15).
    :param inflation: optional stochastic inflation of goal costs; adds the price index and
        last year's inflation rate to the observation, and each step then draws an
        inflation shock right after the market shock from the same generator.
    :param market: random problems' ``(mean shift, volatility factor)`` (see ``sample_problem``).
    :param goal_gap: append the gap to the next goal to the observation (:func:`append_goal_gap`).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        problem: Problem | None = None,
        random: bool = False,
        max_obs_goals: int = 4,
        max_levels: int = 2,
        k: int = 15,
        inflation: Inflation | None = None,
        market: tuple[float, float] = (0.0, 1.0),
        goal_gap: bool = False,
    ):
        super().__init__()
        if (problem is None) != random:
            raise ValueError("give a problem, or random=True, not both")
        self.random = random
        self.market = market
        self.max_obs_goals = int(max_obs_goals)
        self.max_levels = int(max(max_levels, problem.max_levels if problem else 1))
        self.k = problem.k if problem is not None else int(k)
        self.problem = (
            problem if problem is not None else sample_problem(np.random.default_rng(0), max_levels)
        )
        self.inflation = inflation
        self.goal_gap = bool(goal_gap)
        self.action_space = spaces.MultiDiscrete([1 + self.max_levels, self.k])
        size = observation_size(self.max_obs_goals, self.max_levels, inflation is not None, self.goal_gap)
        self.observation_space = spaces.Box(-OBS_CLIP, OBS_CLIP, shape=(size,), dtype=np.float32)
        self._batch = WealthBatch(self.problem, 1, inflation)

    def _obs(self) -> np.ndarray:
        b = self._batch
        price = None
        if self.inflation is not None:
            price = (float(b.price_index[0]), float(b.inflation_rate[0]))
        obs = observe(
            self.problem, int(b.t[0]), float(b.wealth[0]), self.max_obs_goals, self.max_levels, price
        )
        return append_goal_gap(obs[None, :])[0] if self.goal_gap else obs

    def _info(self) -> dict[str, Any]:
        b = self._batch
        n_goals = max(len(self.problem.goals), 1)
        info = {
            "wealth": float(b.wealth[0]),
            "t": int(b.t[0]),
            "utility": float(b.utility[0]),
            "goals_taken": float((b.goals_taken[0] > 0).sum() / n_goals),
            "max_utility": self.problem.max_utility,
        }
        if self.inflation is not None:
            info["price_index"] = float(b.price_index[0])
        return info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if self.random:
            self.problem = sample_problem(self.np_random, self.max_levels, *self.market)
            self._batch = WealthBatch(self.problem, 1, self.inflation)
        self._batch.reset()
        return self._obs(), self._info()

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        a = np.asarray(action, dtype=np.int64).reshape(2)
        if self.inflation is None:
            z, e = self.np_random.standard_normal(1), None
        else:  # market shock, then inflation shock, from the same stream
            z, e = np.split(self.np_random.standard_normal(2), 2)
        reward, done = self._batch.step(a[:1], a[1:], z, e=e)
        return self._obs(), float(reward[0]), bool(done[0]), False, self._info()
