"""The two optimisation stages of a slot: UAV waypoints (SOCP, cvxpy) and offloading ratios (LP, HiGHS).

**Trajectories (sequential distributed SOCP).** UAV ``u`` picks its next waypoint ``q`` given the
latest waypoints of the others (those already planned this slot, the current positions of the
rest). Its objective is a coverage-weighted surrogate of the uplink rates of the vehicles it is
likely to serve. With the excess loss frozen at the current position, the rate
``R_k = log2(1 + gamma_k / d_k^2)`` is convex in ``x = d_k^2``, so its tangent at the current
distance is a global lower bound ``R_k >= R_k0 - A_k (d_k^2 - d_k0^2)`` (the successive convex
approximation of Zeng & Zhang's trajectory papers); the altitude's effect on the LoS probability
enters as its first-order term ``G_k (z - z0)``. Maximising ``sum_k w_k (-A_k ||q - p_k||^2 + G_k z)``
is a convex quadratic programme; with the speed limit ``||q_xy - q0_xy|| <= v_max dt`` it is a
second-order cone programme. The separation ``||q - q_j|| >= d_min`` is non-convex; it is replaced
by its linearisation around the current positions, ``n_j^T (q - q_j) >= d_min`` with
``n_j = (q0 - q_j)/||q0 - q_j||``, which is an inner approximation (any ``q`` meeting it is at least
``d_min`` from ``q_j``, because ``||x|| >= n^T x`` for a unit ``n``). A non-negative slack with a large
penalty keeps the problem feasible when the limits cannot all be met; the engine counts the
separations that end up violated. Each UAV's problem is compiled once with cvxpy parameters (DPP),
so a slot re-solves without re-canonicalising.

**Offloading ratios (LP).** Given the allocation, delay and energy are linear in the offloaded
fraction ``lambda_k`` (see :meth:`UavWorld.remote_terms`), so
``min sum_k w_d t_k + w_e (E_loc,k (1 - lambda_k) + E_rem,k lambda_k) + w_pen s_k`` subject to
``t_k >= (1 - lambda_k) T_loc,k``, ``t_k >= lambda_k T_rem,k``, ``t_k <= tau_k + s_k``,
``0 <= lambda_k <= 1`` is a linear programme, solved by HiGHS through scipy's ``linprog``. The slack
``s_k`` (deadline overshoot) keeps impossible deadlines from making the whole slot infeasible.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import cvxpy as cp
import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from fieldrl.simulators.uav import channel as ch
from fieldrl.simulators.uav.engine import UavWorld

SCALE_M = 100.0  # the SOCP works in hectometres: better conditioned than metres
SEPARATION_PENALTY = 1e3


class WaypointSOCP:
    """One UAV's compiled waypoint problem (cvxpy parameters, re-solved every slot).

    :param n_others: number of other UAVs (rows of the separation constraint).
    :param reach_h: horizontal distance reachable in one slot (m).
    :param reach_v: vertical distance reachable in one slot (m).
    :param z_min: lowest altitude (m).
    :param z_max: highest altitude (m).
    :param area: side of the area (m).
    :param solver: cvxpy conic solver name.
    """

    def __init__(
        self,
        n_others: int,
        reach_h: float,
        reach_v: float,
        z_min: float,
        z_max: float,
        area: float,
        solver: str = "CLARABEL",
    ):
        s = SCALE_M
        self.solver = solver
        self.q = cp.Variable(3)
        self.lin = cp.Parameter(3)
        self.q0 = cp.Parameter(3)
        self.n_others = n_others
        objective = cp.sum_squares(self.q) - self.lin @ self.q
        cons = [
            cp.norm(self.q[:2] - self.q0[:2], 2) <= reach_h / s,
            cp.abs(self.q[2] - self.q0[2]) <= reach_v / s,
            self.q[2] >= z_min / s,
            self.q[2] <= z_max / s,
            self.q[:2] >= 0.0,
            self.q[:2] <= area / s,
        ]
        if n_others:
            self.normals = cp.Parameter((n_others, 3))
            self.offsets = cp.Parameter(n_others)
            self.slack = cp.Variable(n_others, nonneg=True)
            cons.append(self.normals @ self.q + self.slack >= self.offsets)
            objective = objective + SEPARATION_PENALTY * cp.sum(self.slack)
        self.problem = cp.Problem(cp.Minimize(objective), cons)

    def solve(
        self, q0: np.ndarray, target: np.ndarray, others: np.ndarray, d_min: float
    ) -> tuple[np.ndarray, str]:
        """Waypoint (m) nearest ``target`` in the sense of the surrogate, within the limits.

        :param q0: current position (m).
        :param target: unconstrained optimum of the surrogate (m); the objective is
            ``||q - target||^2`` up to a constant.
        :param others: ``(n_others, 3)`` latest waypoints of the other UAVs (m).
        """
        s = SCALE_M
        self.q0.value = q0 / s
        self.lin.value = 2.0 * target / s
        if self.n_others:
            diff = q0[None, :] - others
            norm = np.linalg.norm(diff, axis=1, keepdims=True)
            fallback = np.tile([1.0, 0.0, 0.0], (len(others), 1))
            normals = np.where(norm > 1e-9, diff / np.maximum(norm, 1e-9), fallback)
            self.normals.value = normals
            self.offsets.value = d_min / s + np.sum(normals * others / s, axis=1)
        try:
            self.problem.solve(solver=self.solver)
        except cp.error.SolverError:
            return q0.copy(), "solver_error"
        if self.q.value is None or self.problem.status not in ("optimal", "optimal_inaccurate"):
            return q0.copy(), str(self.problem.status)
        return np.asarray(self.q.value, float) * s, str(self.problem.status)


@dataclass
class TrajectoryResult:
    waypoints: np.ndarray  # (M, 3) m
    solve_ms: np.ndarray  # (M,) wall time of each UAV's solve
    status: list[str]


class TrajectoryPlanner:
    """Sequential distributed SOCP waypoints for every UAV of a :class:`UavWorld`."""

    def __init__(self, world: UavWorld):
        p = world.p
        self.world = world
        self.problems = [
            WaypointSOCP(
                world.m - 1,
                p.v_max_mps * p.slot_s,
                p.vz_max_mps * p.slot_s,
                p.z_min_m,
                p.z_max_m,
                p.area_m,
                p.socp_solver,
            )
            for _ in range(world.m)
        ]

    def coverage_weights(self, uav: np.ndarray, se_bs: np.ndarray) -> np.ndarray:
        """``(n, M)`` weight of each vehicle for each UAV: task cycles x soft nearest-UAV share x BS "
        "relief."""
        p, world = self.world.p, self.world
        load = np.where(world.tasks.present, world.tasks.cycles, 0.0) / 1e9
        d = np.linalg.norm(world.vehicles[:, None, :] - uav[None, :, :2], axis=2)
        logits = -d / p.coverage_length_m
        share = np.exp(logits - logits.max(axis=1, keepdims=True))
        share /= share.sum(axis=1, keepdims=True)
        relief = 1.0 / (1.0 + se_bs / 4.0)
        return load[:, None] * share * relief[:, None]

    def surrogate_target(self, u: int, uav: np.ndarray, weights: np.ndarray) -> np.ndarray | None:
        """Unconstrained optimum of UAV ``u``'s rate surrogate (m), or None without weighted vehicles."""
        p, world = self.world.p, self.world
        w = weights[:, u]
        if w.sum() <= 0:
            return None
        q0 = uav[u]
        veh = np.c_[world.vehicles, np.full(world.n, p.vehicle_antenna_m)]
        horiz = np.linalg.norm(veh[:, :2] - q0[:2], axis=1)
        height = max(q0[2] - p.vehicle_antenna_m, 1.0)
        x0 = horiz**2 + height**2
        elev = ch.elevation_deg(horiz, height)
        p_los = ch.los_probability(elev, p.los_a, p.los_b)
        eta = p_los * p.eta_los_db + (1 - p_los) * p.eta_nlos_db
        band = world.bandwidth_hz[u] / max(1.0, world.n / world.m)
        if band <= 0:  # a UAV without spectrum serves no one: nothing to fly towards
            return None
        wavelength = ch.LIGHT_SPEED / (p.carrier_ghz * 1e9)
        noise = ch.noise_power_w(band, p.noise_dbm_hz, p.noise_figure_db)
        gamma = p.tx_power_w * (wavelength / (4 * np.pi)) ** 2 * 10 ** (-eta / 10) / noise
        a = gamma / (np.log(2) * x0 * (x0 + gamma))  # -dR/d(d^2) at the current distance
        snr = gamma / x0
        dtheta_dz = np.degrees(horiz / x0)
        dp_dtheta = p.los_a * p.los_b * np.exp(-p.los_b * (elev - p.los_a)) * p_los**2
        deta_dz = (p.eta_los_db - p.eta_nlos_db) * dp_dtheta * dtheta_dz
        g = -(np.log(10) / 10) * snr / (1 + snr) / np.log(2) * deta_dz  # dR/dz through P_LoS
        wa = w * a
        if wa.sum() <= 0:
            return None
        centre = (wa[:, None] * veh).sum(axis=0) / wa.sum()
        centre[2] += (w * g).sum() / (2 * wa.sum())
        return centre if np.isfinite(centre).all() else None

    def plan(self) -> TrajectoryResult:
        world = self.world
        uav = world.uav.copy()
        se_bs = world.spectral_efficiency()[:, -1]
        times = np.zeros(world.m)
        status = []
        for u in range(world.m):
            weights = self.coverage_weights(uav, se_bs)
            target = self.surrogate_target(u, uav, weights)
            start = time.perf_counter()
            if target is None:
                status.append("hover")
            else:
                others = np.delete(uav, u, axis=0)
                uav[u], st = self.problems[u].solve(world.uav[u], target, others, world.p.d_min_m)
                status.append(st)
            times[u] = (time.perf_counter() - start) * 1e3
        return TrajectoryResult(uav, times, status)


# ---------------------------------------------------------------------------------------- LP


@dataclass
class RatioResult:
    ratio: np.ndarray  # (n,) offloaded fraction
    delay: np.ndarray  # (n,) the LP's delay epigraph variable
    objective: float
    status: int
    solve_ms: float


def solve_offloading_lp(
    t_local: np.ndarray,
    t_remote: np.ndarray,
    e_local: np.ndarray,
    e_remote: np.ndarray,
    deadline: np.ndarray,
    include: np.ndarray,
    w_delay: float,
    w_energy: float,
    w_overshoot: float,
) -> RatioResult:
    """Offloaded fractions minimising weighted delay + energy with soft deadlines (HiGHS).

    :param t_local: time to run the whole task locally (s).
    :param t_remote: time to send and run the whole task at its server (s; ``inf`` = no server).
    :param e_local: energy of running it all locally (J).
    :param e_remote: energy of sending and running it all remotely (J).
    :param deadline: deadline (s).
    :param include: tasks in the LP (present ones); others get ratio 0.
    :param w_overshoot: cost per second beyond the deadline (the slack's price).
    """
    n = len(t_local)
    ratio, delay = np.zeros(n), np.zeros(n)
    idx = np.flatnonzero(include)
    k = len(idx)
    if k == 0:
        return RatioResult(ratio, delay, 0.0, 0, 0.0)
    start = time.perf_counter()
    tl, tr = t_local[idx], t_remote[idx]
    allowed = np.isfinite(tr)
    tr = np.where(allowed, tr, 0.0)
    er = np.where(np.isfinite(e_remote[idx]), e_remote[idx], 0.0)
    c = np.r_[w_energy * (er - e_local[idx]), np.full(k, w_delay), np.full(k, w_overshoot)]
    # rows 0..k-1: -(T_loc) lam - t <= -T_loc; rows k..2k-1: T_rem lam - t <= 0; rows 2k..3k-1: t - s <= tau
    r = np.arange(k)
    rows = np.r_[r, r, r + k, r + k, r + 2 * k, r + 2 * k]
    cols = np.r_[r, r + k, r, r + k, r + k, r + 2 * k]
    vals = np.r_[-tl, -np.ones(k), tr, -np.ones(k), np.ones(k), -np.ones(k)]
    a_ub = sparse.csr_matrix((vals, (rows, cols)), shape=(3 * k, 3 * k))
    b_ub = np.r_[-tl, np.zeros(k), deadline[idx]]
    bounds = [(0.0, 1.0 if a else 0.0) for a in allowed] + [(0.0, None)] * (2 * k)
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    ms = (time.perf_counter() - start) * 1e3
    if res.x is None:  # cannot happen for this always-feasible LP; keep everything local if it does
        ratio[idx] = 0.0
        delay[idx] = tl
        return RatioResult(ratio, delay, float("nan"), int(res.status), ms)
    ratio[idx] = np.clip(res.x[:k], 0.0, 1.0)
    delay[idx] = res.x[k : 2 * k]
    objective = float(res.fun + w_energy * e_local[idx].sum())
    return RatioResult(ratio, delay, objective, int(res.status), ms)
