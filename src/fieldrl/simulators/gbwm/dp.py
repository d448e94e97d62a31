"""Optimal GBWM policy by backward induction on a log-wealth grid (Das et al. 2020).

The year-``t`` Bellman equation splits in two. Paying for goal choice ``g`` (cost ``c_g``,
utility ``u_g``) and adding the infusion moves wealth ``W`` to the post-cost wealth
``x = W - c_g + I_t``; the portfolio is then chosen for ``x``::

    Q_k(t, x) = sum_j P_k(x -> W_j) V(t+1, W_j)
    V(t, W)   = max over affordable g (c_g <= W) of  u_g + max_k Q_k(t, W - c_g + I_t)
    V(T, W)   = best utility of the goal due at T that W affords (0 if none)

``P_k(x -> W_j)`` is the lognormal transition of one year in portfolio ``k`` onto the grid:
by default (``method="density"``, as in the paper) the normal density of the log return
``ln W_j - ln x`` evaluated at the grid points and normalised over ``j``; ``method="cdf"``
gives each grid point the probability of its cell instead. Rows start from the *exact*
post-cost wealth ``x`` (never snapped to the grid), and the value at ``W0`` is computed
from ``W0`` itself. Post-cost wealth below the grid's floor (or above its top) is treated
as the floor (top); the grid is made wide enough for that to carry no weight.

Grid (paper): ``ln W_min = ln W0 + (mu_min - sigma_max^2/2) T - 3 sigma_max sqrt(T)``,
``ln W_max = ln(W0 + sum I) + (mu_max - sigma_min^2/2) T + 3 sigma_max sqrt(T)``, spacing
``sigma_min / grid_density``; shifted so the cheapest level of the goal due at ``T`` lies
midway between two points (else ``W0`` on a point). With goals before ``T`` or infusions,
wealth can fall close to 0, so the floor is lowered to ``ln m - mu_max T - 3 sigma_max
sqrt(T)`` with ``m`` the smallest positive cost or infusion: below it the cheapest goal is
out of reach.

``solve`` builds a transition row from every post-cost wealth (``rows="exact"``, ``(K, n, n)``
arrays: right for the paper's coarse grid, slow for fine ones) or computes ``Q`` on the grid by
convolution and reads it between grid points (``rows="interpolated"``, ``O(n log n)``).
``solve_converged`` refines the grid until ``V(0, W0)`` settles to 0.1 %: the reference the
``dp`` heuristic and ``pct_of_dp`` use. The paper's grid is close on the single-goal base case
but measured −1.4 % to +6.9 % off on random multi-goal problems (docs/wealth.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fieldrl.simulators.gbwm.engine import Problem

Method = Literal["density", "cdf"]
Rows = Literal["exact", "interpolated"]

#: default tolerance of :func:`solve_converged`: relative change of ``V(0, W0)`` between grids.
RTOL = 1e-3
#: kernel half-width of :func:`grid_q`, in standard deviations (``exp(-12**2/2)`` is negligible).
KERNEL_SD = 12.0
#: finest grid density :func:`solve_converged` tries (its peak memory is that grid's)
MAX_DENSITY = 32.0


def _grid_range(problem: Problem, grid_density: float, n_sd: float) -> tuple[float, float, int, int]:
    """``(anchor, dx, first, last)``: :func:`make_grid` is ``anchor + dx * arange(first, last + 1)``."""
    if not (grid_density > 0 and math.isfinite(grid_density)):
        raise ValueError(f"grid_density must be finite and > 0, got {grid_density}")
    if not n_sd > 0:
        raise ValueError(f"n_sd must be > 0, got {n_sd}")
    f, T = problem.frontier, problem.T
    s_min, s_max = float(f.sigma.min()), float(f.sigma.max())
    mu_min, mu_max = float(f.mu.min()), float(f.mu.max())
    spread = n_sd * s_max * math.sqrt(T)
    lo = math.log(problem.W0) + (mu_min - s_max**2 / 2) * T - spread
    hi = math.log(problem.W0 + sum(problem.infusions)) + (mu_max - s_min**2 / 2) * T + spread
    early_costs = any(g.time < T for g in problem.goals) or any(x > 0 for x in problem.infusions)
    amounts = [c for g in problem.goals for c, _ in g.levels if c > 0]
    amounts += [x for x in problem.infusions if x > 0]
    if early_costs and amounts:
        lo = min(lo, math.log(min(amounts)) - max(mu_max, 0.0) * T - spread)
    dx = s_min / grid_density
    terminal = [c for g in problem.goals if g.time == T for c, _ in g.levels if c > 0]
    anchor = math.log(min(terminal)) + dx / 2 if terminal else math.log(problem.W0)
    return anchor, dx, math.floor((lo - anchor) / dx), math.ceil((hi - anchor) / dx)


def make_grid(problem: Problem, grid_density: float = 1.0, n_sd: float = 3.0) -> np.ndarray:
    """Equally spaced log-wealth grid covering every wealth the problem can plausibly reach.

    :param problem: the problem.
    :param grid_density: points per ``sigma_min`` of log wealth (the paper's ``rho_grid``).
    :param n_sd: width of the grid beyond the drift, in ``sigma_max sqrt(T)`` units.
    :return: increasing ``ln W`` grid points.
    """
    anchor, dx, first, last = _grid_range(problem, grid_density, n_sd)
    return anchor + dx * np.arange(first, last + 1)


def grid_points(problem: Problem, grid_density: float = 1.0, n_sd: float = 3.0) -> int:
    """Points of :func:`make_grid` (``problem``, ``grid_density``, ``n_sd``), computed without making it."""
    _, _, first, last = _grid_range(problem, grid_density, n_sd)
    return last - first + 1


def solve_bytes(problem: Problem, grid_density: float = 1.0, n_sd: float = 3.0, rows: Rows = "exact") -> int:
    """Peak memory of :func:`solve` with these arguments, estimated from the grid size alone.

    ``interpolated``: the ``(T+1, n)`` value and policy tables, the ``(T, K, n)`` ``Q`` table and a
    year's :func:`grid_q` work (kernels and FFT buffers over ``n`` plus the kernel width);
    ``exact``: also the ``(K, n, n)`` transition rows and one more such block for post-cost rows.
    Measured peaks (tracemalloc) are 0.65-0.8 of it.
    """
    n = grid_points(problem, grid_density, n_sd)
    T, K = problem.T, problem.k
    f = problem.frontier
    dx = float(f.sigma.min()) / grid_density
    half = math.ceil(float(np.max(np.abs(f.drift) + KERNEL_SD * f.sigma)) / dx) + 1
    tables = n * (2 + 3 * (T + 1) + T * K + 6 * K)
    if rows == "exact":
        return 8 * (tables + 2 * K * n * n)
    return 8 * (tables + 3 * K * (2 * half + 1) + 8 * K * (n + 4 * half))


def converged_bytes(problem: Problem, max_density: float = MAX_DENSITY) -> int:
    """Peak memory of :func:`solve_converged` at most: its finest grid, while the previous one is kept."""
    return sum(solve_bytes(problem, d, rows="interpolated") for d in (max_density, max_density / 2))


def transition(
    log_x: np.ndarray,
    log_grid: np.ndarray,
    drift: np.ndarray,
    sigma: np.ndarray,
    method: Method = "density",
) -> np.ndarray:
    """One-year transition probabilities from log wealth ``log_x`` onto ``log_grid``.

    :param log_x: ``(m,)`` starting log wealth (post-cost, need not be on the grid).
    :param log_grid: ``(n,)`` increasing, equally spaced grid.
    :param drift: ``(K,)`` mean log returns ``mu - sigma^2/2``.
    :param sigma: ``(K,)`` volatilities.
    :param method: ``density`` (normalised density at grid points) or ``cdf`` (cell masses).
    :return: ``(K, m, n)`` rows summing to 1.
    """
    log_x = np.asarray(log_x, dtype=np.float64)
    mean = log_x[None, :, None] + drift[:, None, None]
    sd = sigma[:, None, None]
    if method == "density":
        # -z^2/2 shifted by its row maximum (at the grid point nearest the mean, found
        # arithmetically) so rows whose mass lies off the grid do not underflow to 0/0.
        dx = log_grid[1] - log_grid[0] if len(log_grid) > 1 else 1.0
        nearest = log_grid[np.clip(np.rint((mean - log_grid[0]) / dx).astype(np.int64), 0, len(log_grid) - 1)]
        z_near = (nearest - mean) / sd
        p = log_grid[None, None, :] - mean
        p *= 1.0 / sd
        p *= p
        p -= z_near * z_near
        p *= -0.5
        np.exp(p, out=p)
        p /= p.sum(axis=-1, keepdims=True)
        return p
    if method == "cdf":
        from scipy.special import ndtr

        edges = np.concatenate([[-np.inf], 0.5 * (log_grid[1:] + log_grid[:-1]), [np.inf]])
        return np.diff(ndtr((edges[None, None, :] - mean) / sd), axis=-1)
    raise ValueError(f"method must be 'density' or 'cdf', got {method!r}")


def grid_q(
    log_grid: np.ndarray,
    value_next: np.ndarray,
    drift: np.ndarray,
    sigma: np.ndarray,
    method: Method = "density",
) -> np.ndarray:
    """``Q_k`` at every grid point: ``transition(log_grid, log_grid, ...) @ value_next``, by convolution.

    On an equally spaced grid a row's weights depend only on the offset ``j - i`` (up to the
    normalisation at the grid's ends), so the matrix-vector product is a correlation with one
    kernel per portfolio, done by FFT: ``O(n log n)`` time and ``O(n)`` memory instead of the
    ``(K, n, n)`` matrix. ``density``: weights ``exp(-z^2/2)`` normalised over the grid points
    (the sum over the grid is a second correlation); ``cdf``: cell masses, the mass beyond the
    ends going to the end points. Kernels are cut at :data:`KERNEL_SD` standard deviations.

    :param log_grid: ``(n,)`` increasing, equally spaced grid.
    :param value_next: ``(n,)`` values at the grid points.
    :param drift: ``(K,)`` mean log returns.
    :param sigma: ``(K,)`` volatilities.
    :param method: ``density`` or ``cdf`` (as :func:`transition`).
    :return: ``(K, n)``.
    """
    from scipy.signal import fftconvolve  # imported here: sizing a grid (validation) needs no scipy
    from scipy.special import ndtr

    n = len(log_grid)
    dx = float(log_grid[1] - log_grid[0]) if n > 1 else 1.0
    half = int(math.ceil(float(np.max(np.abs(drift) + KERNEL_SD * sigma)) / dx)) + 1
    offsets = dx * np.arange(-half, half + 1)
    z = (offsets[None, :] - drift[:, None]) / sigma[:, None]
    if method == "density":
        kernel = np.exp(-0.5 * z * z)
        padded = np.concatenate([np.zeros(half), value_next, np.zeros(half)])
        inside = np.concatenate([np.zeros(half), np.ones(n), np.zeros(half)])
    elif method == "cdf":
        step = 0.5 * dx / sigma[:, None]
        kernel = ndtr(z + step) - ndtr(z - step)
        padded = np.concatenate([np.full(half, value_next[0]), value_next, np.full(half, value_next[-1])])
        inside = np.ones(n + 2 * half)
    else:
        raise ValueError(f"method must be 'density' or 'cdf', got {method!r}")
    flipped = kernel[:, ::-1]  # correlation = convolution with the reversed kernel
    num = fftconvolve(padded[None, :], flipped, mode="valid", axes=1)
    den = fftconvolve(inside[None, :], flipped, mode="valid", axes=1)
    return num / den


def interp_q(log_grid: np.ndarray, q: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``(K, m)`` values ``q`` (``(K, n)`` at ``log_grid``) read linearly in ``ln x``, clamped to the grid.

    :param log_grid: ``(n,)`` increasing, equally spaced grid (``n >= 2``).
    :param q: ``(K, n)`` values at the grid points.
    :param x: ``(m,)`` wealth (not log).
    """
    g = log_grid
    lx = np.log(np.clip(x, math.exp(g[0]), math.exp(g[-1])))
    pos = (lx - g[0]) / (g[1] - g[0])
    i = np.clip(np.floor(pos).astype(np.int64), 0, len(g) - 2)
    frac = np.clip(pos - i, 0.0, 1.0)
    return q[:, i] * (1.0 - frac) + q[:, i + 1] * frac


@dataclass
class DPSolution:
    """The optimum of a :class:`Problem` on a grid, and the policy it implies.

    :param problem: the problem solved.
    :param log_grid: ``(n,)`` grid of ``ln W``.
    :param value: ``(T+1, n)`` optimal expected utility-to-go ``V(t, W_i)`` at grid wealth.
    :param goal_policy: ``(T+1, n)`` optimal goal choice at grid wealth (row ``T``: terminal goal).
    :param portfolio_policy: ``(T, n)`` portfolio chosen at grid wealth, after the optimal goal choice.
    :param q_grid: ``(T, K, n)`` ``Q_k(t, x)`` at post-cost wealth ``x`` on the grid (used by :meth:`act`).
    :param value_w0: ``V(0, W0)``, computed from ``W0`` exactly.
    :param option_w0: optimal goal choice at ``(0, W0)``.
    :param portfolio_w0: optimal portfolio at ``(0, W0)``.
    :param grid_density: points per ``sigma_min``.
    :param method: transition method.
    :param rows: ``exact`` (a transition row from every post-cost wealth) or ``interpolated``
        (``Q`` on the grid, read between grid points).
    :param refinement: ``(grid_density, value_w0)`` of every grid :func:`solve_converged`
        tried, coarse to fine (empty for a single :func:`solve`).
    """

    problem: Problem
    log_grid: np.ndarray
    value: np.ndarray
    goal_policy: np.ndarray
    portfolio_policy: np.ndarray
    q_grid: np.ndarray
    value_w0: float
    option_w0: int
    portfolio_w0: int
    grid_density: float
    method: str
    rows: str = "exact"
    refinement: tuple[tuple[float, float], ...] = ()

    @property
    def relative_change(self) -> float | None:
        """``|V - V_coarser| / |V|`` between the last two grids of :func:`solve_converged`, else None."""
        if len(self.refinement) < 2:
            return None
        (_, coarse), (_, fine) = self.refinement[-2:]
        return abs(fine - coarse) / max(abs(fine), 1e-300) if fine != coarse else 0.0

    @property
    def wealth_grid(self) -> np.ndarray:
        return np.exp(self.log_grid)

    @property
    def p_goal(self) -> float | None:
        """``P(W_T >= G)`` for a single-goal problem (value / utility), else None."""
        p = self.problem
        if not p.is_single_goal or p.goals[0].levels[0][1] <= 0:
            return None
        return self.value_w0 / p.goals[0].levels[0][1]

    def _interp_q(self, t: int, x: np.ndarray) -> np.ndarray:
        """``(K, m)`` ``Q_k(t, x)`` interpolated linearly in ``ln x`` (clamped to the grid)."""
        return interp_q(self.log_grid, self.q_grid[t], x)

    def act(self, t: int | np.ndarray, wealth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The DP policy at any wealth: goal choice and portfolio, vectorised.

        Compares ``u_g + max_k Q_k(t, W - c_g + I_t)`` over affordable choices with ``Q``
        interpolated linearly in log wealth between grid points, then picks the best
        portfolio for the chosen post-cost wealth the same way. At ``t >= T`` returns the
        best affordable terminal level and portfolio 0.

        :param t: year (scalar, or ``(m,)`` one per investor).
        :param wealth: ``(m,)`` current wealth, before this year's goal.
        :return: ``options (m,)`` and ``portfolios (m,)``, int64.
        """
        w = np.atleast_1d(np.asarray(wealth, dtype=np.float64))
        ts = np.broadcast_to(np.asarray(t, dtype=np.int64), w.shape)
        options = np.zeros(w.shape, dtype=np.int64)
        portfolios = np.zeros(w.shape, dtype=np.int64)
        p = self.problem
        for year in np.unique(ts):
            rows = ts == year
            if year >= p.T:
                options[rows] = p.terminal_choice(w[rows])
                continue
            best = np.full(int(rows.sum()), -np.inf)
            wr = w[rows]
            opt_r = np.zeros(len(wr), dtype=np.int64)
            k_r = np.zeros(len(wr), dtype=np.int64)
            for g in range(p.n_options):
                cost = p.option_cost[year, g]
                ok = cost <= wr
                if not ok.any():
                    continue
                q = self._interp_q(int(year), wr - cost + p.infusion[year])
                val = np.where(ok, p.option_utility[year, g] + q.max(axis=0), -np.inf)
                better = val > best
                best = np.where(better, val, best)
                opt_r = np.where(better, g, opt_r)
                k_r = np.where(better, q.argmax(axis=0), k_r)
            options[rows], portfolios[rows] = opt_r, k_r
        return options, portfolios


def solve(
    problem: Problem,
    grid_density: float = 1.0,
    n_sd: float = 3.0,
    method: Method = "density",
    rows: Rows = "exact",
) -> DPSolution:
    """Backward induction over ``t = T-1 .. 0``, vectorised over grid points and portfolios.

    :param problem: the problem.
    :param grid_density: points per ``sigma_min`` of log wealth (``rho_grid``; 1 as in the
        paper reproduces its 0.669 base case, larger values converge to the continuous optimum).
    :param n_sd: grid half-width in ``sigma_max sqrt(T)`` (paper: 3).
    :param method: ``density`` (paper) or ``cdf`` transition probabilities.
    :param rows: ``exact``: a transition row from every post-cost wealth (``(K, n, n)`` matrices,
        for coarse grids); ``interpolated``: ``Q`` on the grid by :func:`grid_q` (``O(n log n)``)
        read linearly in ``ln x`` at post-cost wealth between grid points, as :meth:`DPSolution.act`
        does. Both start ``V(0, W0)`` from ``W0`` itself.
    """
    if method not in ("density", "cdf"):
        raise ValueError(f"method must be 'density' or 'cdf', got {method!r}")
    if rows not in ("exact", "interpolated"):
        raise ValueError(f"rows must be 'exact' or 'interpolated', got {rows!r}")
    T, K = problem.T, problem.k
    grid = make_grid(problem, grid_density, n_sd)
    wealth = np.exp(grid)
    n = len(grid)
    drift, sigma = problem.frontier.drift, problem.frontier.sigma
    exact = rows == "exact"
    # rows from grid points, reused every year (exact rows only: a (K, n, n) matrix)
    p_grid = transition(grid, grid, drift, sigma, method) if exact else None
    w_lo, w_hi = wealth[0], wealth[-1]

    def apply(p: np.ndarray, v_next: np.ndarray) -> np.ndarray:
        return (p.reshape(-1, n) @ v_next).reshape(p.shape[:2])  # one BLAS gemv

    def post_cost_q(w: np.ndarray, v_next: np.ndarray, q_on_grid: np.ndarray | None) -> np.ndarray:
        if exact or q_on_grid is None:  # exact rows from the post-cost wealth
            return apply(transition(np.log(np.clip(w, w_lo, w_hi)), grid, drift, sigma, method), v_next)
        return interp_q(grid, q_on_grid, w)

    def bellman(t: int, w: np.ndarray, v_next: np.ndarray, q_on_grid: np.ndarray | None):
        w_is_grid = q_on_grid is not None
        best = np.full(len(w), -np.inf)
        opt = np.zeros(len(w), dtype=np.int64)
        port = np.zeros(len(w), dtype=np.int64)
        for g in range(problem.n_options):
            cost = problem.option_cost[t, g]
            ok = cost <= w
            if not ok.any():
                continue
            shift = problem.infusion[t] - cost
            if w_is_grid and shift == 0.0:
                q = q_on_grid
            else:  # only where the choice is affordable
                q = np.full((K, len(w)), -np.inf)
                q[:, ok] = post_cost_q(w[ok] + shift, v_next, q_on_grid)
            val = np.where(ok, problem.option_utility[t, g] + q.max(axis=0), -np.inf)
            better = val > best
            best = np.where(better, val, best)
            opt = np.where(better, g, opt)
            port = np.where(better, q.argmax(axis=0), port)
        return best, opt, port

    value = np.zeros((T + 1, n))
    goal_policy = np.zeros((T + 1, n), dtype=np.int64)
    portfolio_policy = np.zeros((T, n), dtype=np.int64)
    q_grid = np.zeros((T, K, n))
    goal_policy[T] = problem.terminal_choice(wealth)
    value[T] = problem.option_utility[T, goal_policy[T]]
    for t in range(T - 1, -1, -1):
        q_grid[t] = apply(p_grid, value[t + 1]) if exact else grid_q(grid, value[t + 1], drift, sigma, method)
        value[t], goal_policy[t], portfolio_policy[t] = bellman(t, wealth, value[t + 1], q_grid[t])
    v0, o0, k0 = bellman(0, np.array([problem.W0]), value[1], None)
    return DPSolution(
        problem=problem,
        log_grid=grid,
        value=value,
        goal_policy=goal_policy,
        portfolio_policy=portfolio_policy,
        q_grid=q_grid,
        value_w0=float(v0[0]),
        option_w0=int(o0[0]),
        portfolio_w0=int(k0[0]),
        grid_density=float(grid_density),
        method=method,
        rows=rows,
    )


def solve_converged(
    problem: Problem,
    rtol: float = RTOL,
    start_density: float = 2.0,
    max_density: float = MAX_DENSITY,
    method: Method = "density",
) -> DPSolution:
    """The DP on grids refined (density doubled) until ``V(0, W0)`` changes by at most ``rtol`` relative.

    Uses ``rows="interpolated"`` (:func:`solve`), whose cost grows as ``n log n`` in the grid
    size. The value converges roughly linearly in the grid spacing, so the last change bounds
    the remaining error about as well as it measures it (docs/wealth.md gives the measured
    errors against an independent DP). Stops at ``max_density`` whatever the change; the
    solution records every grid tried (:attr:`DPSolution.refinement`).

    :param problem: the problem.
    :param rtol: largest relative change of ``V(0, W0)`` between two successive grids.
    :param start_density: first grid density (points per ``sigma_min``).
    :param max_density: finest grid density tried.
    :param method: transition method.
    """
    if not (rtol > 0 and math.isfinite(rtol)):
        raise ValueError(f"rtol must be finite and > 0, got {rtol}")
    if not 0 < start_density <= max_density:
        raise ValueError(f"need 0 < start_density <= max_density, got {start_density}, {max_density}")
    density = float(start_density)
    sol = solve(problem, density, method=method, rows="interpolated")
    history = [(density, sol.value_w0)]
    while density * 2 <= max_density:
        density *= 2
        sol = solve(problem, density, method=method, rows="interpolated")
        history.append((density, sol.value_w0))
        (_, coarse), (_, fine) = history[-2:]
        if abs(fine - coarse) <= rtol * abs(fine):
            break
    sol.refinement = tuple(history)
    return sol
