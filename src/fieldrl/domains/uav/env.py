"""PettingZoo ``ParallelEnv``: one agent per UAV choosing its share of the slot's tasks.

Each step is one slot. With ``pipeline: true`` (the seed paper's framework):

1. the agents' discrete actions become an allocation (how many tasks each UAV admits, best links
   first, and whether it splits band and CPU equally or by demand; the rest go to the BS);
2. the LP sets offloading ratios; the agents' reward is the (negative, per-vehicle) cost of *that*
   allocation (reward decoupling);
3. the rectifier and the LP alternate (:func:`optimise_slot`) and the rectified plan is executed;
4. vehicles drive on, new tasks arrive, and each UAV flies to its SOCP waypoint (sequential
   distributed SOCP, :class:`TrajectoryPlanner`); propulsion energy is charged to the slot.

With ``pipeline: false`` (the MARL baseline) an agent's action also moves its UAV (hover or one of
four directions at full speed) and fixes the offloading ratio of its tasks; there is no SOCP, LP or
rectifier (BS tasks take the balanced split that equalises local and remote time).

With ``agent_ids: true`` each observation ends with a one-hot UAV index, so ``independent-ppo`` can
give every UAV agent its own networks (the MARL baseline's independent learners).

Centralised heuristics bypass the agents through :meth:`UavParallelEnv.set_plan`. Every agent gets
the same team reward; ``episode_info()`` gives the KPIs so far.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from fieldrl.domains.uav.keys import KPI_KEYS, info_keys  # noqa: F401  (re-exported)
from fieldrl.domains.uav.pipeline import SHARE_MODES, allocation_from_actions, optimise_slot
from fieldrl.domains.uav.rectifier import RECTIFIERS, Rectifier
from fieldrl.simulators.uav.engine import Allocation, Outcome, UavWorld  # noqa: F401
from fieldrl.simulators.uav.opt import TrajectoryPlanner
from fieldrl.simulators.uav.params import UavParams

MOVES = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
VEHICLE_FEATURES = 6
OBS_BOUND = 10.0


@dataclass
class Plan:
    """A complete slot decision from a centralised controller (heuristic)."""

    alloc: Allocation
    ratio: np.ndarray
    trajectory: str = "socp"  # or "hover"


class UavParallelEnv(ParallelEnv):
    """Multi-UAV-assisted vehicular task offloading, one agent per UAV.

    :param params: scenario parameters.
    :param rectifier: overrides ``params.rectifier`` (e.g. a :class:`LanguageModelRectifier`).
    """

    metadata = {"name": "uav_offloading_v0", "render_modes": []}
    render_mode = None

    def __init__(self, params: UavParams | None = None, rectifier: Rectifier | None = None):
        self.params = params if params is not None else UavParams()
        p = self.params
        self.world = UavWorld(p)
        self.possible_agents = [f"uav_{u}" for u in range(p.n_uavs)]
        self.agents: list[str] = []
        self.rectifier = rectifier if rectifier is not None else RECTIFIERS[p.rectifier]()
        self._planner: TrajectoryPlanner | None = None
        self._plan: Plan | None = None
        self.n_admit = len(p.admit_levels)
        if p.pipeline:
            self.n_actions = self.n_admit * len(SHARE_MODES)
        else:
            self.n_actions = self.n_admit * len(MOVES) * len(p.marl_ratio_levels)
        #: trailing one-hot UAV-index entries of each observation (read by independent-ppo)
        self.n_agent_ids = p.n_uavs if p.agent_ids else 0
        self.obs_dim = 12 + VEHICLE_FEATURES * p.n_observed + self.n_agent_ids
        self._reset_counters()

    # ------------------------------------------------------------------ spaces
    @functools.cache  # noqa: B019 - spaces are per agent name, as PettingZoo does
    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(self.obs_dim,), dtype=np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(self.n_actions)

    @property
    def planner(self) -> TrajectoryPlanner:
        if self._planner is None:  # compiled on first use: the MARL baseline never needs it
            self._planner = TrajectoryPlanner(self.world)
        return self._planner

    # ------------------------------------------------------------------ episode
    def _reset_counters(self) -> None:
        self.tasks = self.successes = 0
        self.delay_sum = 0.0
        self.e_prop = self.e_comp = self.e_tx = 0.0
        self.cost_sum = 0.0
        self.slots = 0
        self.socp_ms: list[float] = []
        self.lp_ms: list[float] = []
        self.rect_ms: list[float] = []
        self.rectified = 0
        self.violations = 0
        self.slot_success = 100.0
        self.slot_cost = 0.0
        #: the last slot as executed (for replays): each vehicle's server (-1 local), and its task's fate
        self.last_server = np.full(self.world.n, -1, dtype=np.int64)
        self.last_present = np.zeros(self.world.n, dtype=bool)
        self.last_success = np.zeros(self.world.n, dtype=bool)

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.world.reset(seed)
        self.agents = list(self.possible_agents)
        self._plan = None
        self._reset_counters()
        self._path_loss = self.world.path_loss_db()
        return self._observations(), {a: {} for a in self.agents}

    def set_plan(self, plan: Plan) -> None:
        """Use ``plan`` for the next step instead of the agents' actions (centralised heuristics)."""
        self._plan = plan

    def step(self, actions: dict[str, Any]):
        p, world = self.params, self.world
        pl = self._path_loss
        se = world.spectral_efficiency(pl)
        present = world.tasks.present.copy()
        act = np.array([int(actions.get(a, 0)) for a in self.possible_agents], dtype=np.int64)
        act = np.clip(act, 0, self.n_actions - 1)
        plan, self._plan = self._plan, None
        moves = None
        if plan is not None:
            outcome = world.evaluate(plan.alloc, plan.ratio, pl)
            self.last_server = plan.alloc.server.copy()
            own = outcome
            trajectory = plan.trajectory
        elif p.pipeline:
            admit_idx, mode_idx = np.divmod(act, len(SHARE_MODES))
            admit = np.asarray(p.admit_levels)[admit_idx]
            modes = [SHARE_MODES[i] for i in mode_idx]
            alloc = allocation_from_actions(world, admit, modes, se)
            result = optimise_slot(world, alloc, self.rectifier, p.max_alternations, pl)
            outcome, own = result.outcome, result.first
            self.last_server = result.alloc.server.copy()
            self.lp_ms.append(result.lp_ms)
            self.rect_ms.append(result.rectify_ms)
            self.rectified += result.accepted
            trajectory = "socp"
        else:
            outcome, moves = self._marl_slot(act, se, pl)
            own = outcome
            trajectory = "agents"

        # the world moves on: vehicles drive, new tasks arrive, UAVs fly to their next waypoints
        world.advance()
        if trajectory == "socp":
            traj = self.planner.plan()
            target = traj.waypoints
            self.socp_ms.extend(traj.solve_ms.tolist())
        elif trajectory == "agents":
            target = world.uav.copy()
            target[:, :2] += MOVES[moves] * p.v_max_mps * p.slot_s
        else:
            target = world.uav.copy()
        e_prop, violations = world.fly(target)
        self._path_loss = world.path_loss_db()

        slot_prop = float(e_prop.sum())
        reward = -(float(own.cost.sum()) + p.w_energy * slot_prop) / world.n
        self._account(outcome, present, slot_prop, violations)
        self.slots += 1
        done = self.slots >= p.episode_slots
        rewards = {a: reward for a in self.agents}
        terms = {a: False for a in self.agents}
        truncs = {a: done for a in self.agents}
        infos = {a: {} for a in self.agents}
        obs = self._observations()
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def _marl_slot(self, act: np.ndarray, se: np.ndarray, pl: np.ndarray) -> tuple[Outcome, np.ndarray]:
        p, world = self.params, self.world
        n_ratio = len(p.marl_ratio_levels)
        admit_idx, rest = np.divmod(act, len(MOVES) * n_ratio)
        moves, ratio_idx = np.divmod(rest, n_ratio)
        admit = np.asarray(p.admit_levels)[admit_idx]
        alloc = allocation_from_actions(world, admit, ["demand"] * world.m, se)
        self.last_server = alloc.server.copy()
        terms = world.remote_terms(alloc, pl)
        with np.errstate(invalid="ignore", divide="ignore"):
            balanced = np.nan_to_num(terms["t_local"] / (terms["t_local"] + terms["t_remote"]))
        chosen = np.asarray(p.marl_ratio_levels)[ratio_idx]
        ratio = np.where(alloc.server == world.m, balanced, 0.0)
        on_uav = (alloc.server >= 0) & (alloc.server < world.m)
        ratio[on_uav] = chosen[alloc.server[on_uav]]
        return world.evaluate(alloc, ratio, pl), moves

    def _account(self, outcome: Outcome, present: np.ndarray, e_prop: float, violations: int) -> None:
        p = self.params
        done = outcome.success
        n_tasks = int(present.sum())
        self.tasks += n_tasks
        self.successes += int(done.sum())
        self.delay_sum += float(outcome.delay[done].sum())
        self.e_prop += e_prop
        self.e_comp += float((outcome.e_local + outcome.e_remote).sum())
        self.e_tx += float(outcome.e_tx.sum())
        slot_cost = float(outcome.cost.sum()) + p.w_energy * e_prop
        self.cost_sum += slot_cost
        self.violations += violations
        self.slot_success = 100.0 * float(done.sum()) / max(n_tasks, 1)
        self.slot_cost = slot_cost
        self.last_present, self.last_success = present.copy(), done.copy()

    # ------------------------------------------------------------------ observations and KPIs
    def _observations(self) -> dict[str, np.ndarray]:
        p, world = self.params, self.world
        if not self.agents:
            return {}
        se = world.spectral_efficiency(self._path_loss)
        tasks = world.tasks
        m, n, k = world.m, world.n, p.n_observed
        best_uav = np.argmax(se[:, :m], axis=1)
        present = tasks.present
        z_span = max(p.z_max_m - p.z_min_m, 1e-9)
        bits_max = p.bits_max_mbit * 1e6 * p.load
        out = {}
        for u, agent in enumerate(self.possible_agents):
            pos = world.uav[u]
            mine = present & (best_uav == u)
            others = np.delete(world.uav, u, axis=0)
            if len(others):
                rel = others[:, :2] - pos[:2]
                j = int(np.argmin(np.linalg.norm(rel, axis=1)))
                near = [rel[j, 0] / p.area_m, rel[j, 1] / p.area_m, np.linalg.norm(rel[j]) / p.area_m]
            else:
                near = [0.0, 0.0, 1.0]
            centre = world.vehicles[mine].mean(axis=0) - pos[:2] if mine.any() else np.zeros(2)
            head = [
                pos[0] / p.area_m,
                pos[1] / p.area_m,
                (pos[2] - p.z_min_m) / z_span,
                self.slots / p.episode_slots,
                present.mean(),
                mine.sum() / n,
                float(se[present, m].mean()) / 10.0 if present.any() else 0.0,
                *near,
                centre[0] / p.area_m,
                centre[1] / p.area_m,
            ]
            feats = np.zeros((k, VEHICLE_FEATURES))
            cand = np.flatnonzero(present)
            cand = cand[np.argsort(-se[cand, u])][:k]
            if len(cand):
                feats[: len(cand)] = np.c_[
                    se[cand, u] / 10.0,
                    se[cand, m] / 10.0,
                    tasks.bits[cand] / bits_max,
                    tasks.cycles_per_bit[cand] / p.cpb_max,
                    tasks.deadline[cand] / p.slot_s,
                    (best_uav[cand] == u).astype(float),
                ]
            vec = np.r_[
                np.asarray(head, float),
                feats.ravel(),
                np.eye(self.n_agent_ids)[u] if self.n_agent_ids else [],
            ]
            out[agent] = np.clip(vec, -OBS_BOUND, OBS_BOUND).astype(np.float32)
        return out

    def episode_info(self) -> dict[str, float]:
        world = self.world
        slots = max(self.slots, 1)
        info = {
            "success_rate": 100.0 * self.successes / max(self.tasks, 1),
            # a mean over no completed task is not measured (NaN), not a perfect 0 ms
            "mean_delay_ms": 1e3 * self.delay_sum / self.successes if self.successes else float("nan"),
            "propulsion_j": self.e_prop / slots,
            "computing_j": self.e_comp / slots,
            "transmission_j": self.e_tx / slots,
            "energy_j": (self.e_prop + self.e_comp + self.e_tx) / slots,
            "cost": self.cost_sum / slots,
            "socp_ms": float(np.mean(self.socp_ms)) if self.socp_ms else 0.0,
            "lp_ms": float(np.mean(self.lp_ms)) if self.lp_ms else 0.0,
            "rectify_ms": float(np.mean(self.rect_ms)) if self.rect_ms else 0.0,
            "rectified": self.rectified / slots,
            "separation_violations": float(self.violations),
            "slot_success": self.slot_success,
            "slot_cost": self.slot_cost,
        }
        for u in range(world.m):
            for c, value in zip("xyz", world.uav[u], strict=True):
                info[f"uav{u}_{c}"] = float(value)
        for v in range(world.n):
            for c, value in zip("xy", world.vehicles[v], strict=True):
                info[f"veh{v}_{c}"] = float(value)
        return info

    def close(self) -> None:
        pass


def parallel_env(**kwargs: Any) -> UavParallelEnv:
    """PettingZoo-style factory: ``parallel_env(params=UavParams(...))`` or keyword parameters."""
    params = kwargs.pop("params", None)
    rectifier = kwargs.pop("rectifier", None)
    if params is None:
        params = UavParams(**kwargs)
    elif kwargs:
        raise TypeError(f"give either params or keyword parameters, not both: {sorted(kwargs)}")
    return UavParallelEnv(params, rectifier)
