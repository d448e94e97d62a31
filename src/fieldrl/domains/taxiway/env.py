"""PettingZoo ``ParallelEnv``: one agent per taxiing aircraft, masked actions, foresight observations.

Actions (``Discrete(max_degree + 1)``): 0 holds; at a node, ``k`` takes the node's ``k``-th
segment; inside a segment, 1 continues. ``action_mask(agent)`` allows hold and the moves that
lead toward the agent's goal (no entering other stands, line-up points or exits); with
``safety_mask`` (default) also none of the moves that make a conflict whatever the other
aircraft do (:meth:`SurfaceSim.safe_actions`: into an occupied cell, into a segment with an
oncoming aircraft, onto an active runway). What is left to learn is the rest: keeping
separation while others move, yielding, and not blocking each other for good.

Observation (float32, hierarchical foresight):

1. own state: position (scaled), heading (sin, cos), distance to goal, departure flag, at a
   node, on a runway cell, share of time held, steps held in a row (/20), seniority (share of the
   aircraft within 4 cells that appeared after this one: it breaks the tie between two aircraft
   that otherwise see the same thing and would act alike forever);
2. level 1 — current conflicts nearby: in conflict now, aircraft within 4 cells, distance of
   the nearest, whether the runway ahead on the own shortest path is active now;
3. level 2 — predicted occupancy along the next ``horizon_cells`` cells of the own shortest
   path: for each step ahead, whether another aircraft (assumed to follow its own shortest
   path) is predicted closer than separation there and then, and whether that cell is on a
   runway that will be active then;
4. per action: allowed, progress toward goal, another aircraft closer than separation to
   the target cell now, oncoming aircraft inside the target segment;
5. with ``advice`` only: the move prioritized planning would make now, one-hot over the actions
   (:mod:`fieldrl.domains.taxiway.advice`).

An aircraft still taxiing when the episode is truncated is charged the rest of its way
(remaining cells) in its efficiency term, so that blocking each other for good is never cheaper
than moving. Rewards are kept as three terms (``infos[agent]["reward_terms"]``: safety, efficiency,
progress) and summed with ``weights`` into the scalar reward.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from fieldrl.domains.taxiway.advice import PlannerAdvice
from fieldrl.domains.taxiway.params import TaxiwayParams
from fieldrl.simulators.airport.engine import SurfaceSim, TrafficConfig
from fieldrl.simulators.airport.layout import UNREACHABLE, Layout, Surface, build_surface, load_layout
from fieldrl.simulators.airport.osm import layout_from_geojson

LAYOUT_DIR = Path(__file__).parent / "layouts"
NEAR_RADIUS = 4
TERMS = ("safety", "efficiency", "progress")
OWN = 11  # own-state features


def load_params_layout(layout: str, layout_file: str | None = None) -> Layout:
    """The shipped layout ``layout``, or the user's YAML / GeoJSON file if one is given."""
    if layout_file is None:
        return load_layout(LAYOUT_DIR / f"{layout}.yaml")
    if Path(layout_file).suffix.lower() in (".geojson", ".json"):
        return layout_from_geojson(layout_file, name=Path(layout_file).stem)
    return load_layout(layout_file)


@functools.cache
def shared_surface(layout: str, cell_m: float, separation: int, layout_file: str | None = None) -> Surface:
    """One surface (with its shortest-path caches) per process for each layout and resolution."""
    return build_surface(load_params_layout(layout, layout_file), cell_m, separation)


def _balls_with_dist(surface: Surface, radius: int) -> list[tuple[np.ndarray, np.ndarray]]:
    adj = surface.cell_adj  # type: ignore[attr-defined]
    out = []
    for c in range(surface.n_cells):
        seen = {c: 0}
        queue = deque([c])
        while queue:
            a = queue.popleft()
            if seen[a] >= radius:
                continue
            for b in adj[a]:
                if b not in seen:
                    seen[b] = seen[a] + 1
                    queue.append(b)
        cells = np.array(list(seen), dtype=np.int32)
        out.append((cells, np.array([seen[int(c)] for c in cells], dtype=np.int32)))
    return out


_NEAR: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}


def traffic_config(p: TaxiwayParams) -> TrafficConfig:
    steps = lambda minutes: int(round(minutes * 60.0 / p.dt_s))  # noqa: E731
    rate = p.rate()
    horizon = steps(p.horizon_min)
    expected = rate * p.horizon_min / 60.0
    return TrafficConfig(
        movements_per_hour=rate,
        departure_share=p.departure_share,
        horizon_steps=horizon,
        drain_steps=steps(p.drain_min),
        dt_s=p.dt_s,
        approach_steps=p.approach_steps,
        roll_steps=p.roll_steps,
        max_active=p.max_slots,
        max_movements=int(expected + 6.0 * math.sqrt(expected) + 10),
    )


class TaxiwayEnv(ParallelEnv):
    """Aircraft taxiing on one airport; see the module docstring for spaces and rewards.

    :param params: the scenario parameters (layout, density, resolution, reward weights).
    """

    metadata = {"name": "taxiway_v0", "render_modes": []}

    def __init__(self, params: TaxiwayParams | None = None, **kwargs: Any):
        self.params = params if params is not None else TaxiwayParams(**kwargs)
        p = self.params
        self.surface = shared_surface(p.layout, p.cell_m, p.separation_cells, p.layout_file)
        self.sim = SurfaceSim(self.surface, traffic_config(p))
        self.max_slots = p.max_slots
        self.horizon = p.horizon_cells
        self.n_actions = self.surface.max_degree + 1
        self.possible_agents = [f"ac{i}" for i in range(self.sim.cfg.max_movements)]
        self.agents: list[str] = []
        xy = self.surface.cell_xy
        self._origin = xy.min(axis=0)
        self._scale = max(float(np.ptp(xy[:, 0])), float(np.ptp(xy[:, 1])), 1.0)
        self._dist_scale = float(max(self.surface.n_cells // 4, 10))
        key = id(self.surface)
        if key not in _NEAR:
            _NEAR[key] = _balls_with_dist(self.surface, NEAR_RADIUS)
        self._near = _NEAR[key]
        self.obs_dim = OWN + 4 + 2 * self.horizon + 4 * self.n_actions
        #: with ``params.advice`` the planner's advised move is shown one-hot after the rest
        self.advisor = PlannerAdvice() if p.advice else None
        if self.advisor is not None:
            self.obs_dim += self.n_actions
        self._advised: dict[int, int] = {}
        self.decision_seconds = 0.0
        self.decisions = 0
        self.last_reward_terms: dict[str, np.ndarray] = {}
        self.plan_seconds, self.plans, self.plan_failures, self.planner_fallbacks = 0.0, 0, 0, 0
        self.shielded = False  # set by a runtime shield (:mod:`fieldrl.domains.taxiway.shield`)
        self.shield_overrides, self.shield_unstuck, self.shield_decisions = 0, 0, 0
        self._last: Any = None

    # ------------------------------------------------------------------ spaces
    @functools.cache  # noqa: B019 - one space per agent name, as PettingZoo does
    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, shape=(self.obs_dim,), dtype=np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(self.n_actions)

    @staticmethod
    def index(agent: str) -> int:
        return int(agent[2:])

    def action_mask(self, agent: str) -> np.ndarray:
        mask = np.zeros(self.n_actions, dtype=bool)
        mask[self.allowed(self.index(agent))] = True
        return mask

    def allowed(self, i: int) -> list[int]:
        """Actions aircraft ``i`` may take now (see the module docstring)."""
        acts = self.sim.safe_actions(i) if self.params.safety_mask else self.sim.legal_actions(i)
        wait = self.params.detour_after
        if wait is not None:
            m, s = self.sim.movements[i], self.surface
            if s.pos_node[m.pos] >= 0 and m.wait_run < wait:
                dist = s.dist_to(m.goal)
                acts = [a for a in acts if a == 0 or dist[s.action_target(m.pos, a)] < dist[m.pos]]
        return acts

    # ------------------------------------------------------------------ episode
    def reset(self, seed: int | None = None, options: dict | None = None):
        self.sim.reset(seed)
        self.sim.advance_idle()
        self.agents = [f"ac{i}" for i in self.sim.active]
        self.decision_seconds, self.decisions = 0.0, 0
        self.plan_seconds, self.plans, self.plan_failures, self.planner_fallbacks = 0.0, 0, 0, 0
        self.shield_overrides, self.shield_unstuck, self.shield_decisions = 0, 0, 0
        self._last = None
        if self.advisor is not None:
            self.advisor.reset()
        obs = self._observe()
        return obs, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]):
        sim = self.sim
        before = list(self.agents)
        res = sim.step({self.index(a): int(np.asarray(v).reshape(-1)[0]) for a, v in actions.items()})
        self._last = res
        w = self.params.weights
        rewards: dict[str, float] = {}
        terms: dict[str, bool] = {}
        truncs: dict[str, bool] = {}
        infos: dict[str, dict[str, Any]] = {}
        finished = set(res.finished)
        for agent in before:
            i = self.index(agent)
            safety = -float(res.new_conflicts.get(i, 0)) - 0.25 * float(res.in_conflict.get(i, False))
            safety -= 0.05 * float(res.near.get(i, False))
            efficiency = -1.0 - 0.5 * float(res.held.get(i, False))
            progress = float(res.moved.get(i, 0)) + (5.0 if i in finished else 0.0)
            vec = np.array([safety, efficiency, progress], dtype=np.float32)
            rewards[agent] = float(w.safety * safety + w.efficiency * efficiency + w.progress * progress)
            terms[agent] = i in finished
            truncs[agent] = False
            infos[agent] = {"reward_terms": vec}
        if not sim.active and sim.pending:
            sim.advance_idle()
        if sim.truncated and sim.active:
            for i in list(sim.active):
                agent = f"ac{i}"
                truncs[agent] = True
                if agent in infos:  # stranded: the rest of the way is charged as taxi time
                    left = float(sim.dist_to_goal(i))
                    infos[agent]["reward_terms"][1] -= left
                    rewards[agent] -= w.efficiency * left
                rewards.setdefault(agent, 0.0)
                terms.setdefault(agent, False)
                infos.setdefault(agent, {"reward_terms": np.zeros(3, dtype=np.float32)})
            self.agents = []
            self.last_reward_terms = {a: v["reward_terms"] for a, v in infos.items()}
            return (
                {a: self._obs_one(self.index(a)) for a in truncs if truncs[a]},
                rewards,
                terms,
                truncs,
                infos,
            )
        self.last_reward_terms = {a: v["reward_terms"] for a, v in infos.items()}
        self.agents = [f"ac{i}" for i in sim.active]
        for agent in self.agents:  # newcomers appear in every dict
            rewards.setdefault(agent, 0.0)
            terms.setdefault(agent, False)
            truncs.setdefault(agent, False)
            infos.setdefault(agent, {"reward_terms": np.zeros(3, dtype=np.float32)})
        obs = self._observe()
        for agent in before:
            if agent not in obs:
                obs[agent] = self._terminal_obs(agent)
        return obs, rewards, terms, truncs, infos

    def episode_info(self) -> dict[str, float]:
        info = self.sim.stats()
        info["decision_ms"] = 1000.0 * self.decision_seconds / max(self.decisions, 1)
        info["plan_ms"] = 1000.0 * self.plan_seconds / max(self.plans, 1)
        info["plan_failures"] = float(self.plan_failures)
        info["planner_fallbacks"] = float(self.planner_fallbacks)
        # shield overrides per 100 movements that taxied (as conflicts are counted); NaN unshielded
        taxied = max(info["completed"] + len(self.sim.active), 1.0)
        for key, count in (
            ("shield_overrides", self.shield_overrides),
            ("shield_unstuck", self.shield_unstuck),
        ):
            info[f"{key}_per_100"] = 100.0 * count / taxied if self.shielded else math.nan
        overridden = self.shield_overrides + self.shield_unstuck
        info["shield_override_pct"] = (
            100.0 * overridden / max(self.shield_decisions, 1) if self.shielded else math.nan
        )
        return info

    # ------------------------------------------------------------------ observations
    def _terminal_obs(self, agent: str) -> np.ndarray:
        return np.zeros(self.obs_dim, dtype=np.float32)

    def _observe(self) -> dict[str, np.ndarray]:
        self._predicted = self._predict()
        self._cells = {i: self.sim.cell(i) for i in self.sim.active}
        if self.advisor is not None:
            self._advised = self.advisor.advise(self.sim)
        return {f"ac{i}": self._obs_one(i) for i in self.sim.active}

    def _predict(self) -> dict[tuple[int, int], list[int]]:
        """(steps ahead, cell) -> aircraft predicted there if each follows its shortest path."""
        pred: dict[tuple[int, int], list[int]] = {}
        pc = self.surface.pos_cell
        for i in self.sim.active:
            for h, p in enumerate(self.sim.path_ahead(i, self.horizon), start=1):
                pred.setdefault((h, int(pc[p])), []).append(i)
        return pred

    def _obs_one(self, i: int) -> np.ndarray:
        s, sim = self.surface, self.sim
        m = sim.movements[i]
        if m.pos < 0 or i not in sim.active:
            return np.zeros(self.obs_dim, dtype=np.float32)
        cells = getattr(self, "_cells", {})
        c = int(s.pos_cell[m.pos])
        dist = s.dist_to(m.goal)
        d = int(dist[m.pos])
        x, y = (s.cell_xy[c] - self._origin) / self._scale
        age = max(sim.t - m.spawn_t, 1)
        own = [
            2 * x - 1,
            2 * y - 1,
            math.sin(m.heading),
            math.cos(m.heading),
            min(d / self._dist_scale, 1.0),
            float(m.departure),
            float(s.pos_node[m.pos] >= 0),
            float(s.cell_runway[c] >= 0),
            m.held / age,
            min(m.wait_run / 20.0, 1.0),
        ]
        # level 1: now, nearby
        others = {cc: j for j, cc in cells.items() if j != i}
        occupied: dict[int, int] = {}
        for j, cc in cells.items():
            if j != i:
                occupied[cc] = occupied.get(cc, 0) + 1
        near_cells, near_d = self._near[c]
        n_near, nearest = 0, NEAR_RADIUS + 1
        near_set = {int(cc) for cc in near_cells}
        for cc, dd in zip(near_cells, near_d, strict=True):
            k = occupied.get(int(cc), 0)
            if k:
                n_near += k
                nearest = min(nearest, int(dd))
        near_others = [j for j, cc in cells.items() if j != i and cc in near_set]
        later = sum(1 for j in near_others if (sim.movements[j].spawn_t, j) > (m.spawn_t, i))
        own.append(later / len(near_others) if near_others else 1.0)
        in_conflict = float(self._last is not None and self._last.in_conflict.get(i, False))
        path = sim.path_ahead(i, self.horizon)
        rw_now = 0.0
        for p in path:
            r = int(s.cell_runway[s.pos_cell[p]])
            if r >= 0:
                rw_now = float(sim.runway_active(r, sim.t))
                break
        level1 = [in_conflict, min(n_near / 4.0, 1.0), nearest / (NEAR_RADIUS + 1), rw_now]
        # level 2: predicted along own path
        pred = getattr(self, "_predicted", {})
        level2 = []
        for h, p in enumerate(path, start=1):
            pc = int(s.pos_cell[p])
            hit = any(j != i for cc in s.ball[pc] for j in pred.get((h, int(cc)), ()))
            r = int(s.cell_runway[pc])
            level2 += [float(hit), float(r >= 0 and sim.runway_active(r, sim.t + h, exclude=i))]
        # per action
        legal = set(self.allowed(i))
        per = []
        for a in range(self.n_actions):
            if a not in legal:
                per += [0.0, 0.0, 0.0, 0.0]
                continue
            q = s.action_target(m.pos, a)
            qc = int(s.pos_cell[q])
            busy = any(int(cc) in others for cc in s.ball[qc])
            oncoming = 0.0
            e = int(s.pos_edge[q])
            if e >= 0 and q != m.pos:
                for j in sim.active:
                    pj = sim.movements[j].pos
                    if j != i and int(s.pos_edge[pj]) == e and int(s.pos_dir[pj]) != int(s.pos_dir[q]):
                        oncoming = 1.0
                        break
            prog = 0.0 if dist[q] >= UNREACHABLE else float(np.clip(d - int(dist[q]), -1, 1))
            per += [1.0, prog, float(busy), oncoming]
        if self.advisor is not None:
            advised = [0.0] * self.n_actions
            advised[self._advised.get(i, 0)] = 1.0
            per += advised
        obs = np.asarray(own + level1 + level2 + per, dtype=np.float32)
        return np.clip(obs, -1.0, 1.0)


def parallel_env(**kwargs: Any) -> TaxiwayEnv:
    """PettingZoo factory: ``parallel_env(layout="small", density="low", ...)`` (TaxiwayParams fields)."""
    return TaxiwayEnv(TaxiwayParams(**kwargs))
