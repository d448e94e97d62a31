"""Centralised taxi controllers: what a ground controller or a surface manager would do today.

All act on the whole evaluation batch through ``bind_envs`` (they read each ``TaxiwayEnv``'s
engine) and return actions ``(n_episodes, n_slots)``:

* ``shortest-path`` — every aircraft follows its shortest path and never waits (no control);
* ``fcfs`` — shortest path, first come first served: an aircraft holds when its next cell
  would be closer than separation to another aircraft (earlier movements decide first),
  when it would enter a segment against oncoming traffic, or when it would enter a runway
  that is active, or becomes active before it is across;
* ``prioritized`` — prioritized planning: each aircraft, in order of appearance, gets the
  shortest conflict-free plan in the time-expanded graph given everyone's reserved plans
  (space-time reservation table, A*); the strong planning baseline;
* ``cbs`` — conflict-based search over all taxiing aircraft, re-planned whenever one
  appears, within a time limit (falls back to prioritized planning when the limit is hit).

Planners record planning time and failures on the env (``plan_ms``, ``plan_failures``).
"""

from __future__ import annotations

import heapq
import itertools
import time
from typing import Any

import numpy as np
from pydantic import Field

from fieldrl.domains.base import HeuristicSpec, NoSettings, Settings
from fieldrl.policies.base import Policy
from fieldrl.simulators.airport.engine import SurfaceSim
from fieldrl.simulators.airport.planning import Reservations, action_towards, plan_path


class PlannerSettings(Settings):
    max_expansions: int = Field(30000, ge=100, le=10_000_000, description="A* node expansions per plan.")
    max_wait: int = Field(400, ge=10, le=100000, description="Steps of waiting a plan may contain.")


class CBSSettings(PlannerSettings):
    time_limit_s: float = Field(
        0.5, gt=0.0, le=600.0, description="Seconds per CBS search before falling back."
    )
    max_agents: int = Field(8, ge=1, le=100, description="Fall back to prioritized planning above this many.")


class _Centralised(Policy):
    """Plumbing shared by the controllers: bind to the batch, ask ``decide`` per episode."""

    def __init__(self, name: str):
        self.name = name
        self._envs: Any = None

    def reset(self, n_envs: int) -> None:
        self._envs = None

    def bind_envs(self, envs: Any) -> None:
        self._envs = envs
        self._state = [self.fresh_state() for _ in envs.envs]

    def fresh_state(self) -> Any:
        return None

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs)
        out = np.zeros(obs.shape[:2], dtype=np.int64)
        if self._envs is None:
            return out
        for k, env in enumerate(self._envs.envs):
            if not env.agents:
                continue
            decided = self.decide(env, k)
            for slot, agent in enumerate(self._envs.slot_agents(k)):
                if agent is not None:
                    out[k, slot] = decided.get(env.index(agent), 0)
        return out

    def decide(self, env: Any, k: int) -> dict[int, int]:
        raise NotImplementedError


class ShortestPath(_Centralised):
    """Everyone on their shortest path, no waiting (what happens without any control)."""

    def decide(self, env: Any, k: int) -> dict[int, int]:
        sim: SurfaceSim = env.sim
        s = sim.s
        out = {}
        for i in sim.active:
            m = sim.movements[i]
            out[i] = action_towards(s, m.pos, int(s.next_to(m.goal)[m.pos]), m.goal)
        return out


class FCFS(_Centralised):
    """Shortest path, first come first served, hold on conflict (see module docstring).

    An aircraft held for ``patience`` steps in a row tries the other moves open to it (a detour,
    nearest to its goal first) so that two aircraft waiting for each other do not wait forever.
    """

    patience = 4

    def fresh_state(self) -> dict[int, int]:
        return {}

    def decide(self, env: Any, k: int) -> dict[int, int]:
        sim: SurfaceSim = env.sim
        s = sim.s
        waits: dict[int, int] = self._state[k]
        order = sorted(sim.active)
        where = {i: sim.movements[i].pos for i in order}  # decided next positions, else current
        out: dict[int, int] = {}
        for i in order:
            m = sim.movements[i]
            nxt = int(s.next_to(m.goal)[m.pos])
            options = [nxt] if nxt >= 0 else []
            if waits.get(i, 0) >= self.patience:
                dist = s.dist_to(m.goal)
                others = sorted((int(dist[q]), q) for _, q in s.successors(m.pos, m.goal) if q != nxt)
                options += [q for d, q in others if d < 10**8]
            chosen = next((q for q in options if self._clear(sim, i, q, where)), None)
            if chosen is None:
                out[i] = 0
                waits[i] = waits.get(i, 0) + 1
                continue
            waits[i] = 0
            where[i] = chosen
            out[i] = action_towards(s, m.pos, chosen, m.goal)
        return out

    @staticmethod
    def _clear(sim: SurfaceSim, i: int, nxt: int, where: dict[int, int]) -> bool:
        s = sim.s
        m = sim.movements[i]
        c = int(s.pos_cell[nxt])
        ball = set(map(int, s.ball[c]))
        goal_reached = nxt == m.goal
        for j, pj in where.items():
            if j == i or goal_reached:
                continue
            if int(s.pos_cell[pj]) in ball:
                return False
        e = int(s.pos_edge[nxt])
        if e >= 0 and int(s.pos_edge[m.pos]) != e:  # entering a segment: nobody coming the other way
            for j, pj in where.items():
                pc = sim.movements[j].pos
                for p in (pj, pc):
                    if j != i and int(s.pos_edge[p]) == e and int(s.pos_dir[p]) != int(s.pos_dir[nxt]):
                        return False
        r = int(s.cell_runway[c])
        if r >= 0 and int(s.cell_runway[s.pos_cell[m.pos]]) < 0:
            # entering a runway: it must stay inactive until this aircraft is across
            steps, p = 1, nxt
            nx = s.next_to(m.goal)
            while int(s.cell_runway[s.pos_cell[p]]) >= 0 and steps < 50:
                p = int(nx[p])
                steps += 1
            if any(sim.runway_active(r, sim.t + h, exclude=i) for h in range(1, steps + 2)):
                return False
        return True


class PlanState:
    """Space-time plans (aircraft -> (start time, positions)) and their reservation table."""

    def __init__(self) -> None:
        self.res = Reservations()
        self.plans: dict[int, tuple[int, list[int]]] = {}

    def planned_pos(self, i: int, t: int) -> int | None:
        """Where aircraft ``i``'s plan puts it at ``t`` (None: no plan, or not at that time)."""
        if i not in self.plans:
            return None
        t0, plan = self.plans[i]
        k = t - t0
        return plan[k] if 0 <= k < len(plan) else None

    def moves(self, sim: SurfaceSim) -> dict[int, int]:
        """Every taxiing aircraft's action toward its planned next position (0, hold, without one)."""
        out = {}
        for i in sim.active:
            m = sim.movements[i]
            nxt = self.planned_pos(i, sim.t + 1)
            out[i] = 0 if nxt is None else action_towards(sim.s, m.pos, nxt, m.goal)
        return out


class Prioritized(_Centralised):
    """Prioritized planning with a space-time reservation table (A* in the time-expanded graph)."""

    def __init__(self, name: str, max_expansions: int = 30000, max_wait: int = 400):
        super().__init__(name)
        self.max_expansions = max_expansions
        self.max_wait = max_wait

    def fresh_state(self) -> PlanState:
        return PlanState()

    def _plan(self, env: Any, st: PlanState, i: int, deadline: float | None = None) -> bool:
        sim: SurfaceSim = env.sim
        m = sim.movements[i]
        start = time.perf_counter()
        plan = plan_path(
            sim, st.res, i, m.pos, m.goal, sim.t, self.max_expansions, self.max_wait, deadline=deadline
        )
        env.plan_seconds += time.perf_counter() - start
        env.plans += 1
        if plan is None:
            env.plan_failures += 1
            return False
        st.plans[i] = (sim.t, plan)
        st.res.add(sim.s, plan, sim.t, i, sim.cfg.roll_steps, m.runway if m.departure else -1)
        return True

    def decide(self, env: Any, k: int) -> dict[int, int]:
        sim: SurfaceSim = env.sim
        st: PlanState = self._state[k]
        st.res.prune(sim.t - 1)
        for i in [i for i in st.plans if i not in sim.active]:
            del st.plans[i]
        for i in sorted(sim.active):
            if st.planned_pos(i, sim.t) != sim.movements[i].pos:
                st.plans.pop(i, None)
                self._plan(env, st, i)
        return st.moves(sim)


class CBS(Prioritized):
    """Conflict-based search (Sharon et al. 2015) over all taxiing aircraft, re-run when one appears."""

    def __init__(
        self,
        name: str,
        max_expansions: int = 30000,
        max_wait: int = 400,
        time_limit_s: float = 0.5,
        max_agents: int = 8,
    ):
        super().__init__(name, max_expansions, max_wait)
        self.time_limit_s = time_limit_s
        self.max_agents = max_agents

    def decide(self, env: Any, k: int) -> dict[int, int]:
        sim: SurfaceSim = env.sim
        st: PlanState = self._state[k]
        for i in [i for i in st.plans if i not in sim.active]:
            del st.plans[i]
        stale = [i for i in sim.active if st.planned_pos(i, sim.t) != sim.movements[i].pos]
        if stale:
            start = time.perf_counter()
            plans = None
            if len(sim.active) <= self.max_agents:
                plans = cbs(
                    sim, sorted(sim.active), self.max_expansions, self.max_wait, start + self.time_limit_s
                )
            if plans is not None:
                env.plan_seconds += time.perf_counter() - start
                env.plans += 1
                st.plans = {i: (sim.t, p) for i, p in plans.items()}
                st.res = reservations_of(sim, st.plans)
            else:
                env.planner_fallbacks += 1
                env.plan_seconds += time.perf_counter() - start
                st.res = reservations_of(sim, {i: v for i, v in st.plans.items() if i not in stale})
                for i in stale:
                    st.plans.pop(i, None)
                    self._plan(env, st, i)
        return st.moves(sim)


def reservations_of(sim: SurfaceSim, plans: dict[int, tuple[int, list[int]]]) -> Reservations:
    """The reservation table of ``plans`` (aircraft -> (start time, positions)); a departure's take-off
    is reserved only by a plan that ends at its line-up point (not by a plan to hold)."""
    res = Reservations()
    for i, (t0, plan) in sorted(plans.items()):
        m = sim.movements[i]
        takeoff = m.departure and plan[-1] == m.goal
        res.add(sim.s, plan, t0, i, sim.cfg.roll_steps, m.runway if takeoff else -1)
    return res


def first_conflict(sim: SurfaceSim, plans: dict[int, list[int]], t0: int) -> tuple[Any, ...] | None:
    """The earliest conflict between planned paths (all starting at ``t0``), as a CBS needs it.

    Returns ``(t, [(agent, kind, key), (agent, kind, key)])`` with constraint keys: ``("cell", c)``,
    ``("edge", e)``, ``("hop", c_from, c_to)``, ``("goal",)`` (a departure's arrival time) or
    ``("runway", r)`` (being on runway ``r``'s cells); None if the plans are conflict-free.
    """
    s = sim.s
    roll = sim.cfg.roll_steps
    horizon = max(len(p) for p in plans.values())
    takeoffs = {i: t0 + len(p) - 1 for i, p in plans.items() if sim.movements[i].departure}
    for k in range(1, horizon):
        t = t0 + k
        live = {i: p[k] for i, p in plans.items() if k < len(p) - 1}  # at its goal an aircraft has left
        occ: dict[int, list[int]] = {}
        for i, q in live.items():
            occ.setdefault(int(s.pos_cell[q]), []).append(i)
        for i, q in sorted(live.items()):
            c = int(s.pos_cell[q])
            for cc in s.ball[c]:
                for j in occ.get(int(cc), ()):
                    if j > i:
                        return t, [(i, ("cell", c)), (j, ("cell", int(cc)))]
            e = int(s.pos_edge[q])
            if e >= 0:
                for j, qj in live.items():
                    if j > i and int(s.pos_edge[qj]) == e and int(s.pos_dir[qj]) != int(s.pos_dir[q]):
                        return t, [(i, ("edge", e)), (j, ("edge", e))]
            prev = plans[i][k - 1]
            if prev != q:
                for j, qj in live.items():
                    pj = plans[j][k - 1]
                    if (
                        j > i
                        and pj != qj
                        and s.pos_cell[pj] == s.pos_cell[q]
                        and s.pos_cell[qj] == s.pos_cell[prev]
                    ):
                        return t, [
                            (i, ("hop", int(s.pos_cell[prev]), c)),
                            (j, ("hop", int(s.pos_cell[pj]), int(s.pos_cell[qj]))),
                        ]
            r = int(s.cell_runway[c])
            if r >= 0:
                for d, td in takeoffs.items():
                    if d != i and sim.movements[d].runway == r and td <= t < td + roll:
                        return t, [(i, ("runway", r)), (d, ("goal", td))]
    items = sorted(takeoffs.items(), key=lambda x: x[1])
    for (a, ta), (b, tb) in itertools.combinations(items, 2):
        if sim.movements[a].runway == sim.movements[b].runway and abs(ta - tb) < roll:
            return min(ta, tb), [(a, ("goal", ta)), (b, ("goal", tb))]
    return None


def cbs(
    sim: SurfaceSim, agents: list[int], max_expansions: int, max_wait: int, deadline: float
) -> dict[int, list[int]] | None:
    """Conflict-free plans for ``agents`` from their positions now, or None at the deadline."""
    s = sim.s
    empty = Reservations()
    t0 = sim.t

    def low(i: int, cons: frozenset) -> list[int] | None:
        m = sim.movements[i]
        mine = [c for c in cons if c[0] == i]
        if not mine:
            forbidden = None
        else:
            cells = {(key[1], t) for _, key, t in mine if key[0] == "cell"}
            edges = {(key[1], t) for _, key, t in mine if key[0] == "edge"}
            hops = {(key[1], key[2], t) for _, key, t in mine if key[0] == "hop"}
            goals = {t for _, key, t in mine if key[0] == "goal"}
            runways = {(key[1], t) for _, key, t in mine if key[0] == "runway"}

            def forbidden(p: int, q: int, t1: int) -> bool:
                c = int(s.pos_cell[q])
                if (c, t1) in cells or (int(s.pos_edge[q]), t1) in edges:
                    return True
                if (int(s.pos_cell[p]), c, t1) in hops:
                    return True
                if q == m.goal and t1 in goals:
                    return True
                return (int(s.cell_runway[c]), t1) in runways

        return plan_path(sim, empty, i, m.pos, m.goal, t0, max_expansions, max_wait, forbidden, deadline)

    root: dict[int, list[int]] = {}
    for i in agents:
        p = low(i, frozenset())
        if p is None:
            return None
        root[i] = p
    counter = itertools.count()
    heap = [(sum(len(p) for p in root.values()), next(counter), frozenset(), root)]
    while heap:
        if time.perf_counter() > deadline:
            return None
        _, _, cons, plans = heapq.heappop(heap)
        found = first_conflict(sim, plans, t0)
        if found is None:
            return plans
        t, pair = found
        for agent, key in pair:
            when = key[1] if key[0] == "goal" else t
            new = cons | {(agent, key if key[0] != "goal" else ("goal",), when)}
            path = low(agent, new)
            if path is None:
                continue
            child = dict(plans)
            child[agent] = path
            heapq.heappush(heap, (sum(len(p) for p in child.values()), next(counter), new, child))
    return None


HEURISTICS: dict[str, HeuristicSpec] = {
    "shortest-path": HeuristicSpec(
        NoSettings,
        lambda s, p, name: ShortestPath(name),
        "Every aircraft on its shortest path, never waiting.",
    ),
    "fcfs": HeuristicSpec(
        NoSettings,
        lambda s, p, name: FCFS(name),
        "Shortest path, first come first served, hold when the next cell, segment or runway is in conflict.",
    ),
    "prioritized": HeuristicSpec(
        PlannerSettings,
        lambda s, p, name: Prioritized(name, s.max_expansions, s.max_wait),
        "Prioritized planning: A* in the time-expanded graph around a space-time reservation table.",
        # its reservation table holds the moves it planned, not the ones another policy made
        not_askable="plans from its own earlier decisions",
    ),
    "cbs": HeuristicSpec(
        CBSSettings,
        lambda s, p, name: CBS(name, s.max_expansions, s.max_wait, s.time_limit_s, s.max_agents),
        "Conflict-based search over all taxiing aircraft within a time limit (else prioritized planning).",
        # its reservation table holds the moves it planned, not the ones another policy made
        not_askable="plans from its own earlier decisions",
    ),
}
