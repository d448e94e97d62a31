"""The wealth (GBWM) domain's environments: batched evaluation envs and the SB3 training VecEnv.

Kept apart from :mod:`~fieldrl.domains.wealth.domain` so that checking a scenario imports no
Stable-Baselines3 (``BatchedVecEnv`` is an SB3 ``VecEnv``).

Held-out episodes and seeds
---------------------------
The runner gives ``make_eval_envs`` one env seed per episode and the held-out seed (case)
each episode belongs to. An env with seed ``x`` behaves exactly like
``WealthEnv.reset(seed=x)`` (its generator ``default_rng(x)`` draws the problem, for random
problems, and then one market shock per year), with one change for random problems: the
problem is the one drawn by its held-out seed ``s`` (``sample_problem(default_rng(s))``), so
the ``episodes_per_seed`` episodes of one held-out seed are market paths of one held-out
problem, and averaging them estimates that problem's expected utility.

With stochastic inflation of goal costs (``params.inflation``) every env also draws one
inflation shock per year from the same generator, right after that year's market shock
(``WealthEnv.step`` order), so every policy meets the same price-index paths on the same
seeds. There is no DP optimum then: ``dp_value`` and the ``pct_of_dp`` KPI are NaN
(not applicable), and the ``dp`` heuristic refuses to build.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from fieldrl.domains.base import EvalEnvs
from fieldrl.domains.vec_env import BatchedVecEnv
from fieldrl.domains.wealth.env import (
    OBS_CLIP,
    append_goal_gap,
    apply_prices,
    observation_size,
    observe,
)
from fieldrl.domains.wealth.heuristics import ProblemObs, action_sizes, dp_solution
from fieldrl.domains.wealth.params import WealthParams
from fieldrl.simulators.gbwm.engine import SAMPLE_T, Inflation, Problem, WealthBatch, sample_problem


class _Group:
    """Envs sharing one problem: one :class:`WealthBatch`, its market (and inflation) shocks."""

    def __init__(
        self,
        problem: Problem,
        rows: np.ndarray,
        z: np.ndarray,
        obs_args: tuple[int, int],
        inflation: Inflation | None = None,
        e: np.ndarray | None = None,
    ):
        self.problem, self.rows, self.z, self.e = problem, rows, z, e
        self.batch = WealthBatch(problem, len(rows), inflation)
        self.obs_args = obs_args
        self.inflation = inflation

    def obs(self) -> np.ndarray:
        p, b = self.problem, self.batch
        t = int(b.t[0])
        if self.inflation is not None:
            raw = observe(p, min(t, p.T), p.W0, *self.obs_args, price=(1.0, 0.0), clip=False)
            out = np.repeat(raw[None, :], len(self.rows), axis=0)
            out[:, 1] = b.wealth / p.W0
            apply_prices(out, b.price_index, b.inflation_rate, *self.obs_args)
            return np.clip(out, -OBS_CLIP, OBS_CLIP)
        static = observe(p, min(t, p.T), p.W0, *self.obs_args).astype(np.float64)
        out = np.repeat(static[None, :], len(self.rows), axis=0)
        out[:, 1] = np.clip(b.wealth / p.W0, -OBS_CLIP, OBS_CLIP)
        return out


class WealthEvalEnvs(EvalEnvs):
    """One held-out episode per seed, stepped in lockstep (see the module doc for the seeds).

    Observations come as :class:`ProblemObs` (rows' problems attached, for ``dp``).
    ``initial_info``: ``dp_value`` (DP optimum of the env's problem), ``W0``, ``T``,
    ``n_goals``, ``problem`` (index of the held-out problem in seed order), ``goal_due``
    ``(n, max T + 1)``. Step info: ``wealth`` (after the year, and after the goal at ``T``
    on the last step), ``option`` (goal level taken this year, 0 = none), ``portfolio``,
    ``terminal_wealth`` (wealth reaching ``T``; NaN on other steps), ``terminal_option``
    and ``terminal_gain`` (level and utility of the goal settled at ``T``; 0 on other steps);
    with inflation also ``price_index`` (the index after the year). With inflation
    ``dp_value`` is NaN: there is no DP optimum.

    :param params: the domain parameters.
    :param seeds: one env seed per episode.
    :param cases: the held-out seed of each episode (decides its problem when problems are
        random); ``None``: each episode is its own case.
    """

    def __init__(self, params: WealthParams, seeds: Sequence[int], cases: Sequence[int] | None = None):
        self.seeds = [int(s) for s in seeds]
        self.n = len(self.seeds)
        fixed = params.problem()
        self.inflation = inflation = params.inflation_model()
        self.n_options, self.k = action_sizes(params)
        levels = self.n_options - 1
        roots = self.seeds if cases is None else [int(c) for c in cases]
        problems: list[Problem] = []
        shocks: list[np.ndarray] = []
        price_shocks: list[np.ndarray] = []
        by_root: dict[int, Problem] = {}
        for seed, root in zip(self.seeds, roots, strict=True):
            rng = np.random.default_rng(seed)
            problem = fixed
            if problem is None:
                sample_problem(rng, levels)  # draws as WealthEnv(random=True).reset(seed=seed) does ...
                if root not in by_root:  # ... but the problem is the held-out seed's
                    by_root[root] = sample_problem(np.random.default_rng(root), levels, *params.market())
                problem = by_root[root]
            problems.append(problem)
            if inflation is None:
                shocks.append(rng.standard_normal(problem.T))
            else:  # year by year: market shock, then inflation shock (as WealthEnv.step draws them)
                draws = rng.standard_normal((problem.T, 2))
                shocks.append(draws[:, 0])
                price_shocks.append(draws[:, 1])
        self.problems = tuple(problems)
        order = list(dict.fromkeys(self.problems))  # held-out problems in seed order
        index = {p: j for j, p in enumerate(order)}
        self.problem_index = np.array([index[p] for p in self.problems])
        obs_args = (params.max_obs_goals, levels)
        self.groups = []
        for j, p in enumerate(order):
            rows = np.flatnonzero(self.problem_index == j)
            e = None if inflation is None else np.stack([price_shocks[i] for i in rows])
            self.groups.append(_Group(p, rows, np.stack([shocks[i] for i in rows]), obs_args, inflation, e))
        self.goal_gap = params.goal_gap
        self._base_size = observation_size(*obs_args, inflation is not None) if order else 0
        self.obs_size = observation_size(*obs_args, inflation is not None, self.goal_gap) if order else 0
        self.initial_info: dict[str, np.ndarray] = {}

    def _obs(self) -> ProblemObs:
        out = np.zeros((self.n, self._base_size))
        for g in self.groups:
            out[g.rows] = g.obs()
        if self.goal_gap and self.n:
            out = append_goal_gap(out)
        return ProblemObs.wrap(out.astype(np.float32), self.problems)

    def reset(self) -> ProblemObs:
        for g in self.groups:
            g.batch.reset()
        max_t = max(p.T for p in self.problems) if self.problems else 0
        goal_due = np.zeros((self.n, max_t + 1))
        for i, p in enumerate(self.problems):
            goal_due[i, [g.time for g in p.goals]] = 1.0
        self.initial_info = {
            "wealth": np.array([p.W0 for p in self.problems]),
            "W0": np.array([p.W0 for p in self.problems]),
            "T": np.array([p.T for p in self.problems], dtype=float),
            "n_goals": np.array([len(p.goals) for p in self.problems], dtype=float),
            "dp_value": (
                np.full(self.n, np.nan)  # no DP optimum under stochastic inflation
                if self.inflation is not None
                else np.array([dp_solution(p).value_w0 for p in self.problems])
            ),
            "problem": self.problem_index.astype(float),
            "goal_due": goal_due,
        }
        return self._obs()

    def step(
        self, actions: np.ndarray
    ) -> tuple[ProblemObs, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        a = np.asarray(actions, dtype=np.int64).reshape(self.n, 2)
        reward = np.zeros(self.n)
        terminated = np.zeros(self.n, dtype=bool)
        info = {
            "wealth": np.zeros(self.n),
            "option": np.zeros(self.n),
            "portfolio": np.zeros(self.n),
            "terminal_wealth": np.full(self.n, np.nan),
            "terminal_option": np.zeros(self.n),
            "terminal_gain": np.zeros(self.n),
        }
        if self.inflation is not None:
            info["price_index"] = np.ones(self.n)
        for g in self.groups:
            b, p, rows = g.batch, g.problem, g.rows
            if b.done.all():
                info["wealth"][rows] = b.wealth
                if self.inflation is not None:
                    info["price_index"][rows] = b.price_index
                terminated[rows] = True
                continue
            t = int(b.t[0])
            option = np.clip(a[rows, 0], 0, p.n_options - 1)
            option = np.where(b.feasible()[np.arange(len(rows)), option], option, 0)
            portfolio = np.clip(a[rows, 1], 0, p.k - 1)
            r, done = b.step(option, portfolio, g.z[:, t], e=None if g.e is None else g.e[:, t])
            reward[rows], terminated[rows] = r, done
            info["wealth"][rows] = b.wealth
            info["option"][rows] = option
            info["portfolio"][rows] = portfolio
            index = None
            if self.inflation is not None:
                info["price_index"][rows] = index = b.price_index
            if done.any():
                level = p.terminal_choice(b.terminal_wealth, index)
                info["terminal_wealth"][rows] = np.where(done, b.terminal_wealth, np.nan)
                info["terminal_option"][rows] = np.where(done, level, 0)
                info["terminal_gain"][rows] = np.where(done, p.option_utility[p.T, level], 0.0)
        return self._obs(), reward, terminated, np.zeros(self.n, dtype=bool), info


def observation_table(
    problem: Problem, max_obs_goals: int, levels: int, inflation: bool = False
) -> np.ndarray:
    """``(T+1, size)`` observations at each year with wealth ``W0`` (column 1 is then replaced).

    With ``inflation`` the rows are unclipped, with listed costs and room for the price entries
    (:func:`~fieldrl.domains.wealth.env.apply_prices` then puts them at today's prices).
    """
    if inflation:
        rows = [
            observe(problem, t, problem.W0, max_obs_goals, levels, price=(1.0, 0.0), clip=False)
            for t in range(problem.T + 1)
        ]
        return np.stack(rows)
    rows = [observe(problem, t, problem.W0, max_obs_goals, levels) for t in range(problem.T + 1)]
    return np.stack(rows).astype(np.float64)


class WealthVecEnv(BatchedVecEnv):
    """``n_envs`` training investors stepped together, autoreset like ``DummyVecEnv``.

    A fixed problem runs as one :class:`WealthBatch`; random problems as one batch per env,
    each drawing a new problem at every reset. Observations and actions are those of
    :class:`WealthEnv`. Env ``i`` draws its problems and market shocks from its own
    generator, spawned from ``np.random.SeedSequence(seed)`` (with inflation, one market and
    one inflation shock per year, in that order).

    :param params: the domain parameters.
    :param n_envs: number of parallel investors.
    :param seed: root seed; None draws one from OS entropy.
    """

    def __init__(self, params: WealthParams, n_envs: int, seed: int | None = None):
        self.render_mode = None
        self.fixed = params.problem()
        self.market = params.market()
        self.inflation = params.inflation_model()
        self._priced = self.inflation is not None
        n_options, k = action_sizes(params)
        self.levels = n_options - 1
        self.obs_args = (params.max_obs_goals, self.levels)
        self.goal_gap = params.goal_gap
        self._size = observation_size(*self.obs_args, self._priced)
        size = observation_size(*self.obs_args, self._priced, self.goal_gap)
        super().__init__(
            n_envs,
            spaces.Box(-OBS_CLIP, OBS_CLIP, shape=(size,), dtype=np.float32),
            spaces.MultiDiscrete([n_options, k]),
        )
        max_t = self.fixed.T if self.fixed is not None else SAMPLE_T[1]
        self._z = np.zeros((n_envs, max_t))
        self._e = np.zeros((n_envs, max_t)) if self._priced else None
        self._actions = np.zeros((n_envs, 2), dtype=np.int64)
        self._pending_seed: int | None = None
        self._seed_rngs(seed)
        self._slots: list[tuple[WealthBatch, np.ndarray]] = []
        self._tables: list[np.ndarray] = []
        if self.fixed is not None:
            self._slots = [(WealthBatch(self.fixed, n_envs, self.inflation), np.arange(n_envs))]
            self._tables = [observation_table(self.fixed, *self.obs_args, self._priced)]
        else:  # placeholders until reset() draws each env's first problem
            placeholder = sample_problem(np.random.default_rng(0), self.levels)
            table = observation_table(placeholder, *self.obs_args, self._priced)
            self._slots = [
                (WealthBatch(placeholder, 1, self.inflation), np.array([i])) for i in range(n_envs)
            ]
            self._tables = [table] * n_envs

    def _seed_rngs(self, seed: int | None) -> None:
        children = np.random.SeedSequence(seed).spawn(self.num_envs)
        self._rngs = [np.random.default_rng(c) for c in children]

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Re-seed every env's generator from ``SeedSequence(seed)`` at the next reset."""
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0])
        self._pending_seed = int(seed)
        return [self._pending_seed] * self.num_envs

    def _restart(self, i: int) -> None:
        """Start a new episode for env ``i`` (a new problem first, for random problems)."""
        rng = self._rngs[i]
        if self.fixed is None:
            problem = sample_problem(rng, self.levels, *self.market)
            self._slots[i] = (WealthBatch(problem, 1, self.inflation), np.array([i]))
            self._tables[i] = observation_table(problem, *self.obs_args, self._priced)
        else:
            problem = self.fixed
            self._slots[0][0].reset([i])
        if self._e is None:
            self._z[i, : problem.T] = rng.standard_normal(problem.T)
        else:  # year by year: market shock, then inflation shock
            draws = rng.standard_normal((problem.T, 2))
            self._z[i, : problem.T], self._e[i, : problem.T] = draws[:, 0], draws[:, 1]

    def _observe(self) -> np.ndarray:
        obs = np.zeros((self.num_envs, self._size))
        for (batch, rows), table in zip(self._slots, self._tables, strict=True):
            obs[rows] = table[np.minimum(batch.t, batch.problem.T)]
            if self._priced:
                obs[rows, 1] = batch.wealth / batch.problem.W0
                obs[rows] = apply_prices(obs[rows], batch.price_index, batch.inflation_rate, *self.obs_args)
            else:
                obs[rows, 1] = np.clip(batch.wealth / batch.problem.W0, -OBS_CLIP, OBS_CLIP)
        if self._priced:
            np.clip(obs, -OBS_CLIP, OBS_CLIP, out=obs)
        return append_goal_gap(obs) if self.goal_gap else obs.astype(np.float32)

    def reset(self) -> np.ndarray:
        if self._pending_seed is not None:
            self._seed_rngs(self._pending_seed)
            self._pending_seed = None
        for i in range(self.num_envs):
            self._restart(i)
        self.reset_infos = [{} for _ in range(self.num_envs)]
        self._reset_seeds()
        self._reset_options()
        return self._observe()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs, 2)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        reward = np.zeros(self.num_envs)
        done = np.zeros(self.num_envs, dtype=bool)
        for batch, rows in self._slots:
            year = np.minimum(batch.t, self._z.shape[1] - 1)
            z = self._z[rows, year]
            e = None if self._e is None else self._e[rows, year]
            reward[rows], done[rows] = batch.step(self._actions[rows, 0], self._actions[rows, 1], z, e=e)
        obs = self._observe()
        infos: list[dict[str, Any]] = [{"TimeLimit.truncated": False} for _ in range(self.num_envs)]
        finished = np.flatnonzero(done)
        for i in finished:
            infos[i]["terminal_observation"] = obs[i].copy()
            self._restart(int(i))
        if len(finished):
            obs[finished] = self._observe()[finished]
        return obs, reward.astype(np.float32), done, infos


# ----------------------------------------------------------------------------- KPIs and traces
