"""Macro-scheduler: rectifiers that repair an allocation's failed and surplus tasks.

A rectifier sees the slot (the world), the current allocation, its LP offloading ratios and
their outcome, and returns a new allocation (or None for "no change"). The pipeline alternates
rectifier and LP and keeps a rectified allocation only if it lowers the slot's cost, so a
rectifier can never make a slot worse. Its interventions never reach the DRL reward (reward
decoupling: the reward is computed on the agent's own allocation before any rectification).

* :class:`RuleRectifier` (default): moves each failed task to the server that makes it meet its
  deadline at the least cost (or to the vehicle itself), then re-splits every server's bandwidth
  and CPU in proportion to what each task needs to meet its deadline, which takes the surplus of
  tasks with slack and gives it to tight ones.
* :class:`LanguageModelRectifier`: an adapter for a language-model macro-scheduler (as in the
  seed paper). It writes the slot as a JSON prompt, hands it to a caller-supplied
  ``backend(prompt) -> reply`` function and applies the task moves in the reply after checking
  them; an unusable reply falls back to the rule. fieldrl ships no backend and needs no network:
  the adapter is off unless a caller constructs it with one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Protocol

import numpy as np

from fieldrl.simulators.uav import channel as ch
from fieldrl.simulators.uav.engine import LOCAL, Allocation, Outcome, UavWorld

TIGHT = 0.95  # rebalancing aims each task at this fraction of its deadline


class Rectifier(Protocol):
    name: str

    def rectify(
        self, world: UavWorld, alloc: Allocation, ratio: np.ndarray, outcome: Outcome, pl: np.ndarray
    ) -> Allocation | None: ...


def balanced_delay(t_local: np.ndarray, t_remote: np.ndarray) -> np.ndarray:
    """Least ``max((1-l) T_loc, l T_rem)`` over the fraction l: ``T_loc T_rem / (T_loc + T_rem)``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(np.isfinite(t_remote), t_local * t_remote / (t_local + t_remote), t_local)
    return np.where(np.isnan(out), 0.0, out)


def equal_shares(server: np.ndarray, present: np.ndarray, n_servers: int) -> np.ndarray:
    """Each offloading task gets ``1 / (tasks on its server)``."""
    counts = np.bincount(server[present & (server >= 0)], minlength=n_servers)
    share = np.zeros(len(server))
    on = present & (server >= 0)
    share[on] = 1.0 / counts[server[on]]
    return share


def rebalance(world: UavWorld, alloc: Allocation, ratio: np.ndarray, pl: np.ndarray) -> Allocation:
    """Shares in proportion to need: the share each task would need to finish by ``TIGHT x deadline``."""
    terms = world.remote_terms(alloc, pl)
    tasks = world.tasks
    out = alloc.copy()
    target = TIGHT * tasks.deadline
    with np.errstate(invalid="ignore", divide="ignore"):
        t_cpu = terms["t_remote"] - terms["t_tx"]
        need_bw = np.where(
            np.isfinite(terms["t_tx"]), alloc.bw_share * ratio * terms["t_tx"] / target, np.nan
        )
        need_cpu = np.where(np.isfinite(t_cpu), alloc.cpu_share * ratio * t_cpu / target, np.nan)
    for s in range(world.m + 1):
        on = tasks.present & (alloc.server == s)
        if not on.any():
            continue
        for need, share in ((need_bw, out.bw_share), (need_cpu, out.cpu_share)):
            nd = need[on]
            # a task with no share at all (nan need) gets an equal share to start from
            nd = np.where(np.isnan(nd), 1.0 / on.sum(), nd)
            total = nd.sum()
            if total > 0:
                share[on] = nd / total
    return out


class RuleRectifier:
    """Move failed tasks to a server that rescues them; re-split surplus shares by need."""

    name = "rule"

    def rectify(
        self, world: UavWorld, alloc: Allocation, ratio: np.ndarray, outcome: Outcome, pl: np.ndarray
    ) -> Allocation | None:
        tasks = world.tasks
        failed = np.flatnonzero(tasks.present & ~outcome.success)
        new = alloc.copy()
        moved = False
        overshoot = outcome.delay[failed] - tasks.deadline[failed]
        for k in failed[np.argsort(-overshoot)]:
            best = self._best_server(world, new, int(k), pl)
            if best is not None and best != new.server[k]:
                new.server[k] = best
                moved = True
        if moved:
            new.bw_share = equal_shares(new.server, tasks.present, world.m + 1)
            new.cpu_share = new.bw_share.copy()
            # ratios of the moved tasks are stale: estimate them by the balanced split
            terms = world.remote_terms(new, pl)
            with np.errstate(invalid="ignore", divide="ignore"):
                split = terms["t_local"] / (terms["t_local"] + terms["t_remote"])
            ratio = np.where(new.server != alloc.server, np.nan_to_num(split), ratio)
            return rebalance(world, new, ratio, pl)
        rebalanced = rebalance(world, new, ratio, pl)
        changed = not (
            np.allclose(rebalanced.bw_share, alloc.bw_share, atol=1e-4)
            and np.allclose(rebalanced.cpu_share, alloc.cpu_share, atol=1e-4)
        )
        return rebalanced if changed else None

    @staticmethod
    def _best_server(world: UavWorld, alloc: Allocation, k: int, pl: np.ndarray) -> int | None:
        """Server (or LOCAL) where task ``k`` meets its deadline without breaking others, least cost.

        A candidate server's tasks, ``k`` included, are assumed to share its band and CPU equally and
        to use the balanced offloaded fraction; only that server's tasks are re-evaluated.
        """
        p, tasks = world.p, world.tasks
        t_local = tasks.cycles / (p.f_local_ghz * 1e9)
        best, best_cost = None, np.inf
        if t_local[k] <= tasks.deadline[k]:
            best, best_cost = LOCAL, float(t_local[k])
        for s in range(world.m + 1):
            if s == alloc.server[k]:
                continue
            peers = np.flatnonzero(tasks.present & (alloc.server == s))
            peers = np.r_[peers, k]
            share = 1.0 / len(peers)
            band = share * world.bandwidth_hz[s]
            rate = ch.shannon_rate_bps(band, p.tx_power_w, pl[peers, s], p.noise_dbm_hz, p.noise_figure_db)
            freq = share * world.cpu_hz[s]
            if band <= 0 or freq <= 0:
                continue
            t_rem = tasks.bits[peers] / np.maximum(rate, 1e-9) + tasks.cycles[peers] / freq
            delay = balanced_delay(t_local[peers], t_rem)
            if np.any(delay > tasks.deadline[peers]):
                continue
            cost = float(delay.sum())
            if cost < best_cost:
                best, best_cost = s, cost
        return best


class LanguageModelRectifier:
    """Adapter for a language-model macro-scheduler (off by default; no network in fieldrl).

    :param backend: ``backend(prompt) -> reply``; the reply must be JSON
        ``{"moves": [{"vehicle": int, "server": int}, ...]}`` with server ``-1`` (local),
        ``0..M-1`` (UAVs) or ``M`` (base station).
    """

    name = "language-model"

    def __init__(self, backend: Callable[[str], str]):
        self.backend = backend
        self.fallbacks = 0
        self.rule = RuleRectifier()

    @staticmethod
    def prompt(world: UavWorld, alloc: Allocation, outcome: Outcome, pl: np.ndarray) -> str:
        tasks = world.tasks
        se = world.spectral_efficiency(pl)
        failed = np.flatnonzero(tasks.present & ~outcome.success)
        load = np.bincount(alloc.server[tasks.present & (alloc.server >= 0)], minlength=world.m + 1)
        body = {
            "instruction": "Reassign failed tasks to servers so they meet their deadlines. Reply with JSON "
            '{"moves": [{"vehicle": i, "server": s}]}; server -1 = local, 0..M-1 = UAVs, M = base station.',
            "servers": [
                {"server": s, "tasks": int(load[s]), "cpu_ghz": float(world.cpu_hz[s] / 1e9)}
                for s in range(world.m + 1)
            ],
            "failed_tasks": [
                {
                    "vehicle": int(k),
                    "server": int(alloc.server[k]),
                    "mbit": round(float(tasks.bits[k] / 1e6), 3),
                    "deadline_s": round(float(tasks.deadline[k]), 3),
                    "bit_per_hz": [round(float(x), 2) for x in se[k]],
                }
                for k in failed
            ],
        }
        return json.dumps(body)

    def rectify(
        self, world: UavWorld, alloc: Allocation, ratio: np.ndarray, outcome: Outcome, pl: np.ndarray
    ) -> Allocation | None:
        reply = self.backend(self.prompt(world, alloc, outcome, pl))
        moves = self.parse(reply, world)
        if moves is None:
            self.fallbacks += 1
            return self.rule.rectify(world, alloc, ratio, outcome, pl)
        if not moves:
            return rebalance(world, alloc, ratio, pl)
        new = alloc.copy()
        for vehicle, server in moves:
            new.server[vehicle] = server
        new.bw_share = equal_shares(new.server, world.tasks.present, world.m + 1)
        new.cpu_share = new.bw_share.copy()
        return new

    @staticmethod
    def parse(reply: str, world: UavWorld) -> list[tuple[int, int]] | None:
        """Checked moves from a reply, or None if the reply is not usable."""
        try:
            data = json.loads(reply)
            moves = [(int(m["vehicle"]), int(m["server"])) for m in data["moves"]]
        except (ValueError, KeyError, TypeError):
            return None
        for vehicle, server in moves:
            if not (0 <= vehicle < world.n and world.tasks.present[vehicle] and LOCAL <= server <= world.m):
                return None
        return moves


RECTIFIERS: dict[str, Callable[[], Rectifier | None]] = {"rule": RuleRectifier, "none": lambda: None}
