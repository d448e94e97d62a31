"""An independent GBWM dynamic programme, to measure the accuracy of :mod:`fieldrl.simulators.gbwm.dp`.

Shares nothing with ``gbwm.dp`` but the :class:`~fieldrl.simulators.gbwm.engine.Problem`. ``V(t, .)`` lives
on a fine, equally spaced ``ln W`` grid (``sigma_min / density`` apart) and is taken *piecewise
linear* between grid points (flat beyond the ends). ``Q_k(t, .)`` at the grid points is the exact
expectation of that piecewise-linear function under the one-year normal log return: the weight of
grid point ``i`` is the expectation of its hat function, a second difference of the closed form
``E[(X - a)^+] = (m - a) Phi((m - a)/s) + s phi((m - a)/s)``, applied to ``V`` as a convolution.
Post-cost wealth between grid points reads ``Q`` linearly in ``ln x`` (``Q`` is smooth: a Gaussian
smoothing of ``V``). ``gbwm.dp`` instead puts point masses on its grid (normalised density or cell
mass), on a grid anchored to the terminal goal, so the two discretisations err differently.

Slow-ish and memory-light (``O(n log n)`` a year); meant for tests and benchmarks, not for policies.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.signal import fftconvolve
from scipy.special import ndtr

from fieldrl.simulators.gbwm.engine import Problem

_SQRT_2PI = math.sqrt(2.0 * math.pi)


def hat_weights(drift: float, sigma: float, dx: float, n_sd: float = 10.0) -> tuple[np.ndarray, int]:
    """Weights ``w[o + L]`` of grid offsets ``o = -L..L``: ``E[hat_o(X)]``, ``X ~ N(drift, sigma)``.

    :param drift: mean one-year log return.
    :param sigma: its standard deviation.
    :param dx: grid spacing.
    :param n_sd: half-width in standard deviations.
    :return: ``(weights summing to 1, L)``.
    """
    half = int(math.ceil((abs(drift) + n_sd * sigma) / dx)) + 1
    offsets = dx * np.arange(-half - 1, half + 2)
    z = (drift - offsets) / sigma
    ramp = (drift - offsets) * ndtr(z) + sigma * np.exp(-0.5 * z * z) / _SQRT_2PI
    w = (ramp[:-2] - 2.0 * ramp[1:-1] + ramp[2:]) / dx
    return w / w.sum(), half


def expected_next(value: np.ndarray, drift: float, sigma: float, dx: float) -> np.ndarray:
    """``E[V(x_j + R)]`` at every grid point ``x_j`` for piecewise-linear ``V`` (flat beyond the ends)."""
    w, half = hat_weights(drift, sigma, dx)
    padded = np.concatenate([np.full(half, value[0]), value, np.full(half, value[-1])])
    return fftconvolve(padded, w[::-1], mode="valid")


def reference_value(problem: Problem, density: float = 80.0, n_sd: float = 4.0) -> float:
    """``V(0, W0)`` of ``problem`` by the independent DP.

    :param problem: the problem.
    :param density: grid points per ``sigma_min`` (80 agrees with 160 to about 0.02 % on random
        multi-goal problems).
    :param n_sd: grid margin beyond the drift, in ``sigma_max sqrt(T)``.
    """
    f, T = problem.frontier, problem.T
    dx = float(f.sigma.min()) / density
    spread = n_sd * float(f.sigma.max()) * math.sqrt(T)
    amounts = [problem.W0] + [c for g in problem.goals for c, _ in g.levels if c > 0]
    amounts += [x for x in problem.infusions if x > 0]
    lo = math.log(min(amounts)) + min(float(f.drift.min()), 0.0) * T - spread
    hi = math.log(problem.W0 + sum(problem.infusions)) + max(float(f.drift.max()), 0.0) * T + spread
    grid = lo + dx * np.arange(int((hi - lo) / dx) + 2)
    wealth = np.exp(grid)
    value = problem.option_utility[T, problem.terminal_choice(wealth)].astype(np.float64)

    def bellman(t: int, w: np.ndarray, v_next: np.ndarray) -> np.ndarray:
        moves = zip(f.drift, f.sigma, strict=True)
        q = np.max([expected_next(v_next, float(d), float(s), dx) for d, s in moves], axis=0)
        best = np.full(len(w), -np.inf)
        for g in range(problem.n_options):
            cost = problem.option_cost[t, g]
            ok = cost <= w
            if ok.any():
                x = np.maximum(w[ok] - cost + problem.infusion[t], 1e-300)
                val = np.full(len(w), -np.inf)
                val[ok] = problem.option_utility[t, g] + np.interp(np.log(x), grid, q)
                best = np.maximum(best, val)
        return best

    for t in range(T - 1, 0, -1):
        value = bellman(t, wealth, value)
    return float(bellman(0, np.array([problem.W0]), value)[0])
