"""Tumour-immune-drug ODE of Ahn & Park (2011), after de Pillis & Radunskaya (2003).

The state of a patient is ``[N, T, I, B]``: normal cells, tumour cells, immune
cells and drug concentration in the blood. The dose ``u`` in ``[0, 1]`` is held
constant over a step of 0.25 day. Conventions (noise, reward, death) follow
DTR-Bench's ``AhnChemoEnv`` (Luo et al. 2024); ``docs/chemo.md`` lists them and
the few places fieldrl deviates.

:class:`ChemoBatch` advances ``n`` patients at once with a fixed-step classical
RK4 vectorised over patients. Every patient's randomness comes only from its own
``numpy.random.Generator``, drawn in full at reset (see
:meth:`ChemoBatch.reset_patients`), so a trajectory is a function of the seed and
the dose sequence alone, whatever batch the patient is simulated in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: nominal model parameters (Ahn & Park 2011, case 2 as used by DTR-Bench), in draw order.
NOMINAL_PARAMS: dict[str, float] = {
    "r1": 1.5,  # tumour growth rate
    "b1": 1.0,  # tumour inverse carrying capacity
    "c2": 0.5,  # tumour kill by immune cells
    "c3": 1.0,  # tumour loss from competition with normal cells
    "a2": 0.3,  # tumour kill by the drug
    "r2": 1.0,  # normal-cell growth rate
    "b2": 1.0,  # normal-cell inverse carrying capacity
    "c4": 1.0,  # normal-cell loss from competition with tumour cells
    "a3": 0.1,  # normal-cell kill by the drug
    "s": 0.33,  # immune-cell source rate
    "rho": 0.01,  # immune response rate
    "alpha": 0.3,  # immune threshold
    "c1": 1.0,  # immune-cell inactivation by tumour cells
    "d1": 0.2,  # immune-cell death rate
    "a1": 0.2,  # immune-cell kill by the drug
    "d2": 1.0,  # drug decay rate
}
PARAM_NAMES: tuple[str, ...] = tuple(NOMINAL_PARAMS)
_NOMINAL = np.array(list(NOMINAL_PARAMS.values()), dtype=np.float64)
_P = {name: i for i, name in enumerate(PARAM_NAMES)}

#: state variable names, in the order of the state vector.
STATE_NAMES: tuple[str, ...] = ("N", "T", "I", "B")
#: nominal initial state [N, T, I, B].
NOMINAL_STATE = np.array([0.9, 0.2, 0.005, 0.0], dtype=np.float64)

#: days per step.
DT = 0.25
#: observation bounds for [T, I, B] (DTR-Bench's observation space).
OBS_LOW = np.zeros(3, dtype=np.float32)
OBS_HIGH = np.array([2.0, 2.0, 1.0], dtype=np.float32)
#: a patient dies when normal cells fall below this fraction of their initial value.
DEATH_FRACTION = 0.7
#: reward of the step in which the patient dies (replaces the ordinary reward).
DEATH_REWARD = -100.0
#: RK4 substeps per 0.25-day step; the fewest that keep the error <= 1e-3 relative with margin
#: (see docs/chemo.md and benchmarks/bench_chemo.py).
DEFAULT_SUBSTEPS = 2


@dataclass(frozen=True)
class ChemoNoise:
    """Noise levels of a DTR-Bench setting (all dimensionless fractions).

    :param obs_noise: multiplicative observation noise, ``obs * (1 + obs_noise * U(-0.5, 0.5))``.
    :param state_noise: process noise s.d. on each derivative, and initial-state spread
        ``U(-state_noise/2, state_noise/2)``.
    :param pkpd_noise: parameter spread, each parameter ``nominal * (1 + U(-w, w))``, ``w = pkpd/2``.
    :param missing_rate: probability that a step's observation is missing (previous one repeated).
    """

    obs_noise: float = 0.0
    state_noise: float = 0.0
    pkpd_noise: float = 0.0
    missing_rate: float = 0.0


#: DTR-Bench's five continuous settings.
PRESETS: dict[str, ChemoNoise] = {
    "s1": ChemoNoise(),
    "s2": ChemoNoise(pkpd_noise=0.1),
    "s3": ChemoNoise(obs_noise=0.2, state_noise=0.1, pkpd_noise=0.1),
    "s4": ChemoNoise(obs_noise=0.5, state_noise=0.2, pkpd_noise=0.1),
    "s5": ChemoNoise(obs_noise=0.5, state_noise=0.2, pkpd_noise=0.1, missing_rate=0.5),
}


def rhs(state: np.ndarray, dose: float | np.ndarray, params: np.ndarray) -> np.ndarray:
    """Time derivative of ``[N, T, I, B]`` (the model equations, written out plainly).

    :param state: ``(4,)`` or ``(4, n)`` state.
    :param dose: dose ``u`` (scalar or ``(n,)``).
    :param params: ``(16,)`` or ``(16, n)`` parameters in :data:`PARAM_NAMES` order.
    :return: derivative with the shape of ``state``.
    """
    n, t, i, b = state
    r1, b1, c2, c3, a2, r2, b2, c4, a3, s, rho, alpha, c1, d1, a1, d2 = params
    kill = 1.0 - np.exp(-b)
    dn = r2 * n * (1.0 - b2 * n) - c4 * t * n - a3 * kill * n
    dt = r1 * t * (1.0 - b1 * t) - c2 * i * t - c3 * t * n - a2 * kill * t
    di = s + rho * i * t / (alpha + t) - c1 * i * t - d1 * i - a1 * kill * i
    db = -d2 * b + dose
    return np.array([dn, dt, di, db])


def reference_trajectory(
    params: np.ndarray,
    init_state: np.ndarray,
    doses: Sequence[float] | np.ndarray,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    method: str = "DOP853",
    state_factors: np.ndarray | None = None,
) -> np.ndarray:
    """Integrate one patient with ``scipy.integrate.solve_ivp``, one call per step.

    Mirrors :meth:`ChemoBatch.step`: the dose (clipped to ``[0, 1]``) is held over each
    0.25-day step and the state is clipped at 0 after each step. For tests and benchmarks.

    :param params: ``(16,)`` parameters in :data:`PARAM_NAMES` order.
    :param init_state: ``(4,)`` initial ``[N, T, I, B]``.
    :param doses: one dose per step.
    :param state_factors: optional ``(steps, 4)`` multipliers ``1 + eps`` of the derivatives,
        held over each step (process noise); None means no process noise.
    :return: ``(steps + 1, 4)`` states, starting with ``init_state``.
    """
    from scipy.integrate import solve_ivp

    params = np.asarray(params, dtype=np.float64)
    doses = np.clip(np.asarray(doses, dtype=np.float64), 0.0, 1.0)
    out = np.empty((len(doses) + 1, 4))
    out[0] = init_state
    x = np.asarray(init_state, dtype=np.float64).copy()
    for k, u in enumerate(doses):
        factor = np.ones(4) if state_factors is None else np.asarray(state_factors[k])

        def f(_t: float, y: np.ndarray, u: float = float(u), factor: np.ndarray = factor):
            return rhs(y, u, params) * factor

        sol = solve_ivp(f, (0.0, DT), x, method=method, rtol=rtol, atol=atol)
        x = np.maximum(sol.y[:, -1], 0.0)
        out[k + 1] = x
    return out


class ChemoBatch:
    """``n`` independent patients advanced together, one 0.25-day step per call.

    Public arrays (one row per patient): ``state`` ``(n, 4)`` ``[N, T, I, B]``,
    ``init_state`` ``(n, 4)``, ``params`` ``(n, 16)``, ``t`` ``(n,)`` steps taken,
    ``obs`` ``(n, 3)`` last delivered observation. Call :meth:`reset_patients` for every
    patient before stepping it.

    :param n: number of patients.
    :param noise: noise levels shared by all patients.
    :param max_t: steps per episode (600 = 150 days); ``truncated`` is set when reached.
    :param substeps: RK4 substeps per step.
    """

    def __init__(
        self,
        n: int,
        noise: ChemoNoise | None = None,
        max_t: int = 600,
        substeps: int = DEFAULT_SUBSTEPS,
    ):
        if n < 1 or max_t < 1 or substeps < 1:
            raise ValueError("n, max_t and substeps must be >= 1")
        self.n = int(n)
        self.noise = noise if noise is not None else ChemoNoise()
        self.max_t = int(max_t)
        self.substeps = int(substeps)
        self.params = np.tile(_NOMINAL, (self.n, 1))
        self.init_state = np.tile(NOMINAL_STATE, (self.n, 1))
        self.state = self.init_state.copy()
        self.t = np.zeros(self.n, dtype=np.int64)
        self.obs = np.zeros((self.n, 3), dtype=np.float32)
        # Per-episode random tables, drawn at reset (unit draws; scaled by the noise levels).
        self._eps = np.zeros((self.n, self.max_t, 4))
        self._obs_u = np.full((self.n, self.max_t + 1, 3), 0.5)
        self._miss_u = np.ones((self.n, self.max_t + 1))
        self._pcols = np.ascontiguousarray(self.params.T)
        self._rows = np.arange(self.n)

    # ------------------------------------------------------------------ reset
    def reset_patients(
        self,
        idx: Sequence[int] | np.ndarray,
        rngs: Sequence[np.random.Generator],
        params: np.ndarray | None = None,
        centres: np.ndarray | None = None,
    ) -> np.ndarray:
        """Draw new patients at positions ``idx``, each from its own generator.

        Draw order per patient (fixed, whatever the noise levels): 16 PK/PD multipliers,
        3 initial-state multipliers, process-noise table ``(max_t, 4)``, observation-noise
        table ``(max_t + 1, 3)``, missing-observation uniforms ``(max_t + 1,)``.

        Given ``params``, a patient's parameters are those (the PK/PD multipliers are still
        drawn, and ignored, so every noise table after them is the one the seed gives without
        ``params``); given ``centres``, the initial-state spread is around those ``[N, T, I]``
        instead of the nominal ones.

        :param idx: patient positions to reset.
        :param rngs: one generator per position in ``idx``.
        :param params: optional ``(len(idx), 16)`` parameters in :data:`PARAM_NAMES` order.
        :param centres: optional ``(len(idx), 3)`` initial ``[N, T, I]`` before the spread.
        :return: initial observations of those patients, ``(len(idx), 3)`` float32.
        """
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        if len(idx) != len(rngs):
            raise ValueError("need one generator per reset patient")
        for given, width in ((params, len(_NOMINAL)), (centres, 3)):
            if given is not None and np.shape(given) != (len(idx), width):
                raise ValueError(f"need ({len(idx)}, {width}) patient values, got {np.shape(given)}")
        w = self.noise.pkpd_noise / 2.0
        v = self.noise.state_noise / 2.0
        for k, (j, rng) in enumerate(zip(idx, rngs, strict=True)):
            pk = rng.uniform(-1.0, 1.0, size=len(_NOMINAL))
            x0 = rng.uniform(-1.0, 1.0, size=3)
            self._eps[j] = rng.standard_normal((self.max_t, 4))
            self._obs_u[j] = rng.random((self.max_t + 1, 3))
            self._miss_u[j] = rng.random(self.max_t + 1)
            self.params[j] = _NOMINAL * (1.0 + w * pk) if params is None else params[k]
            centre = NOMINAL_STATE[:3] if centres is None else centres[k]
            self.init_state[j, :3] = centre * (1.0 + v * x0)
            self.init_state[j, 3] = 0.0
        self._pcols = np.ascontiguousarray(self.params.T)
        self.state[idx] = self.init_state[idx]
        self.t[idx] = 0
        self.obs[idx] = self._observe(idx, self.state[idx], np.zeros(len(idx), dtype=np.int64))
        return self.obs[idx].copy()

    # ------------------------------------------------------------------- step
    def step(
        self, doses: np.ndarray, active: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Advance every (active) patient by one step with its dose held constant.

        The reward is computed on the pre-step state: ``N/N0 - T/T0 - u``, replaced by
        -100 when the post-step ``N`` falls below ``0.7 * N0`` (death, ``terminated``).
        ``truncated`` is set when a surviving patient reaches ``max_t`` steps.

        :param doses: ``(n,)`` doses, clipped into ``[0, 1]``.
        :param active: optional ``(n,)`` mask; inactive patients do not change and get
            reward 0 and no termination flags.
        :return: ``obs (n, 3) float32, reward (n,), terminated (n,), truncated (n,)``.
        """
        u = np.clip(np.asarray(doses, dtype=np.float64).reshape(self.n), 0.0, 1.0)
        x = self.state
        n0, t0 = self.init_state[:, 0], self.init_state[:, 1]
        reward = x[:, 0] / n0 - x[:, 1] / t0 - u

        k = np.minimum(self.t, self.max_t - 1)
        factor = 1.0 + self.noise.state_noise * self._eps[self._rows, k]
        xc = np.ascontiguousarray(x.T)
        new = np.maximum(self._rk4(xc, u, np.ascontiguousarray(factor.T)).T, 0.0)

        t_new = self.t + 1
        terminated = new[:, 0] < DEATH_FRACTION * n0
        truncated = (t_new >= self.max_t) & ~terminated
        reward = np.where(terminated, DEATH_REWARD, reward)
        obs = self._observe(self._rows, new, np.minimum(t_new, self.max_t), self.obs)

        if active is not None:
            active = np.asarray(active, dtype=bool).reshape(self.n)
            keep = ~active
            new[keep] = x[keep]
            t_new[keep] = self.t[keep]
            obs[keep] = self.obs[keep]
            reward[keep] = 0.0
            terminated &= active
            truncated &= active
        self.state = new
        self.t = t_new
        self.obs = obs
        return obs.copy(), reward, terminated, truncated

    # -------------------------------------------------------------- internals
    def _rk4(self, x: np.ndarray, u: np.ndarray, factor: np.ndarray) -> np.ndarray:
        """Classical RK4 over one step in ``substeps`` equal substeps; ``x`` is ``(4, n)``."""
        h = factor * (DT / self.substeps)  # noise multiplies every derivative: fold it into h
        p = self._pcols
        for _ in range(self.substeps):
            k1 = h * self._f(x, u, p)
            k2 = h * self._f(x + 0.5 * k1, u, p)
            k3 = h * self._f(x + 0.5 * k2, u, p)
            k4 = h * self._f(x + k3, u, p)
            x = x + (k1 + 2.0 * (k2 + k3) + k4) * (1.0 / 6.0)
        return x

    @staticmethod
    def _f(x: np.ndarray, u: np.ndarray, p: np.ndarray) -> np.ndarray:
        """:func:`rhs` on column arrays, factored to save numpy calls (same equations)."""
        n, t, i, b = x
        r1, b1, c2, c3, a2, r2, b2, c4, a3, s, rho, alpha, c1, d1, a1, d2 = p
        kill = 1.0 - np.exp(-b)
        out = np.empty_like(x)
        out[0] = n * (r2 * (1.0 - b2 * n) - c4 * t - a3 * kill)
        out[1] = t * (r1 * (1.0 - b1 * t) - c2 * i - c3 * n - a2 * kill)
        out[2] = s + i * (rho * t / (alpha + t) - c1 * t - d1 - a1 * kill)
        out[3] = u - d2 * b
        return out

    def _observe(
        self,
        rows: np.ndarray,
        state: np.ndarray,
        k: np.ndarray,
        previous: np.ndarray | None = None,
    ) -> np.ndarray:
        """Noisy, clipped ``[T, I, B]``; where missing (never at reset) repeat ``previous``."""
        raw = state[:, 1:4]
        noisy = raw + self.noise.obs_noise * raw * (self._obs_u[rows, k] - 0.5)
        obs = np.clip(noisy, OBS_LOW, OBS_HIGH).astype(np.float32)
        if previous is not None and self.noise.missing_rate > 0:
            missing = self._miss_u[rows, k] < self.noise.missing_rate
            obs[missing] = previous[missing]
        return obs
