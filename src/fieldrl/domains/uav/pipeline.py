"""One slot's decision pipeline after the UAVs have flown: allocation -> LP ratios <-> rectifier.

* :func:`allocation_from_actions` turns the UAV agents' discrete choices (how many vehicles each
  admits, and how it splits its band and CPU) into an :class:`Allocation`; unadmitted tasks go to
  the base station, which splits its resources in proportion to demand.
* :func:`optimise_slot` solves the offloading-ratio LP for that allocation (this first outcome is
  the DRL agents' reward: reward decoupling), then alternates rectifier and LP until the
  rectifier changes nothing, the cost stops falling, or ``max_alternations`` is reached.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fieldrl.domains.uav.rectifier import Rectifier
from fieldrl.simulators.uav.engine import Allocation, Outcome, UavWorld

if TYPE_CHECKING:  # loaded where used: checking a scenario needs none of this
    pass

SHARE_MODES = ("equal", "demand")


def demand_shares(world: UavWorld, server: np.ndarray, se: np.ndarray, s: int, mode: str) -> tuple:
    """Bandwidth and CPU shares of server ``s``'s tasks: equal, or by demand (bits/efficiency, cycles)."""
    tasks = world.tasks
    on = tasks.present & (server == s)
    bw, cpu = np.zeros(world.n), np.zeros(world.n)
    if not on.any():
        return bw, cpu
    if mode == "equal":
        bw[on] = cpu[on] = 1.0 / on.sum()
        return bw, cpu
    need_bw = tasks.bits[on] / np.maximum(se[on, s], 1e-3)
    bw[on] = need_bw / need_bw.sum()
    cyc = tasks.cycles[on]
    cpu[on] = cyc / cyc.sum() if cyc.sum() > 0 else 1.0 / on.sum()
    return bw, cpu


def allocation_from_actions(
    world: UavWorld, admit: np.ndarray, modes: list[str], se: np.ndarray
) -> Allocation:
    """Allocation where UAV ``u`` admits up to ``admit[u]`` tasks, best links first.

    Claims are resolved greedily over (UAV, vehicle) pairs in falling spectral efficiency, so a
    vehicle wanted by two UAVs goes to the better link and the other UAV takes its next best.
    """
    tasks = world.tasks
    m, n = world.m, world.n
    server = np.full(n, m, dtype=np.int64)  # base station unless a UAV admits it
    taken = np.zeros(m, dtype=np.int64)
    free = tasks.present.copy()
    if np.any(admit > 0):
        uav_se = se[:, :m]
        order = np.argsort(-uav_se, axis=None)
        for flat in order:
            v, u = divmod(int(flat), m)
            if free[v] and taken[u] < admit[u]:
                server[v] = u
                taken[u] += 1
                free[v] = False
            if not free.any() or np.all(taken >= admit):
                break
    bw, cpu = np.zeros(n), np.zeros(n)
    for s in range(m + 1):
        mode = modes[s] if s < m else "demand"
        b, c = demand_shares(world, server, se, s, mode)
        bw += b
        cpu += c
    server = np.where(tasks.present, server, -1)
    return Allocation(server, bw, cpu)


@dataclass
class SlotResult:
    alloc: Allocation
    ratio: np.ndarray
    outcome: Outcome
    first: Outcome  # the agents' own allocation with its LP ratios (their reward)
    lp_ms: float
    rectify_ms: float
    alternations: int
    accepted: int  # rectifications kept


def lp_ratios(world: UavWorld, alloc: Allocation, pl: np.ndarray):
    from fieldrl.simulators.uav.opt import solve_offloading_lp

    p = world.p
    terms = world.remote_terms(alloc, pl)
    t_remote = np.where(alloc.server >= 0, terms["t_remote"], np.inf)
    e_remote = p.tx_power_w * terms["t_tx"] + terms["e_cpu"]
    overshoot = 10.0 * (p.w_delay + p.w_fail / p.slot_s)
    return solve_offloading_lp(
        terms["t_local"],
        t_remote,
        terms["e_local"],
        e_remote,
        world.tasks.deadline,
        world.tasks.present,
        p.w_delay,
        p.w_energy,
        overshoot,
    )


def optimise_slot(
    world: UavWorld, alloc: Allocation, rectifier: Rectifier | None, max_alternations: int, pl: np.ndarray
) -> SlotResult:
    """LP ratios for ``alloc``, then rectifier <-> LP alternations that lower the slot cost."""
    lp = lp_ratios(world, alloc, pl)
    lp_ms = lp.solve_ms
    outcome = world.evaluate(alloc, lp.ratio, pl)
    first = outcome
    best_alloc, best_ratio, best_cost = alloc, lp.ratio, float(outcome.cost.sum())
    rect_ms, alternations, accepted = 0.0, 0, 0
    if rectifier is not None:
        for _ in range(max_alternations):
            start = time.perf_counter()
            proposal = rectifier.rectify(world, best_alloc, best_ratio, outcome, pl)
            rect_ms += (time.perf_counter() - start) * 1e3
            alternations += 1
            if proposal is None:
                break
            lp = lp_ratios(world, proposal, pl)
            lp_ms += lp.solve_ms
            trial = world.evaluate(proposal, lp.ratio, pl)
            cost = float(trial.cost.sum())
            if cost >= best_cost - 1e-9:
                break
            best_alloc, best_ratio, best_cost, outcome = proposal, lp.ratio, cost, trial
            accepted += 1
    return SlotResult(best_alloc, best_ratio, outcome, first, lp_ms, rect_ms, alternations, accepted)
