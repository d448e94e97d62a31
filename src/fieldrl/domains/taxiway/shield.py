"""A runtime shield around a learned taxi policy: prioritized planning's reservation table vets every move.

The learned policy proposes one action per taxiing aircraft; the shield keeps a space-time plan
for every aircraft (as prioritized planning does) and, in order of appearance, accepts the
proposal only if a conflict-free plan to the goal *starts with that move* given everyone else's
reserved plans. The look-ahead is the whole plan: a move that is clear now but leads onto a
runway that becomes active, or into a segment an oncoming aircraft has reserved, is refused.
A move the planner cannot confirm within ``VET_EXPANSIONS`` search steps is refused too. A
refused move is replaced by the planner's own first step (hold, if the planner finds no plan
either), and counted as an *override*. So is the planner's move when the learned policy keeps
an aircraft holding for ``patience`` steps while the planner would move it (the learned policy's
known failure is freezing in a stand-off; an *unstick* override).

This is the post-posed shield of Alshiekh et al. (2018, "Safe reinforcement learning via
shielding") with prioritized planning as the safety monitor. It is written here because the
monitor is this engine's planner (:mod:`fieldrl.simulators.airport.planning`); no library shields
a PettingZoo policy with a domain planner. The counts go to the env (``shield_overrides``,
``shield_unstuck``, ``shield_decisions``) and from there into ``results.parquet``, so a report
says how often the learned policy decided on its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fieldrl.domains.taxiway.heuristics import PlanState, Prioritized, reservations_of
from fieldrl.policies.base import Policy
from fieldrl.simulators.airport.engine import SurfaceSim
from fieldrl.simulators.airport.planning import action_towards, plan_path

#: steps a held aircraft without any plan keeps its cell reserved (others plan around it)
HOLD_STEPS = 6
#: A* expansions spent on vetting one learned move (a move whose plan needs more is refused: the
#: planner's own search, with its full budget, then decides)
VET_EXPANSIONS = 2000


class ShieldedPolicy(Policy):
    """``learned`` acting through ``planner``'s reservation table (see the module docstring).

    :param name: label in results and reports.
    :param learned: the trained policy (acts on the batch's observations, masks included).
    :param planner: the prioritized planner whose table vets the moves (its settings bound the search).
    :param patience: steps a learned hold may last while the planner would move before the planner's
        move is taken.
    """

    def __init__(self, name: str, learned: Policy, planner: Prioritized, patience: int):
        self.name = name
        self.learned = learned
        self.planner = planner
        self.patience = patience
        self._envs: Any = None
        self._states: list[PlanState] = []

    def reset(self, n_envs: int) -> None:
        self.learned.reset(n_envs)
        self._envs = None
        self._states = []

    def bind_envs(self, envs: Any) -> None:
        self.learned.bind_envs(envs)
        self._envs = envs
        self._states = [PlanState() for _ in envs.envs]
        for env in envs.envs:
            env.shielded = True

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        proposed = np.asarray(self.learned.act(obs, episode_start))
        if self._envs is None:
            return proposed
        out = proposed.copy()
        starts = np.asarray(episode_start).reshape(len(self._envs.envs), -1).any(axis=1)
        for k, env in enumerate(self._envs.envs):
            if starts[k]:
                self._states[k] = PlanState()
            if not env.agents:
                continue
            slots = [
                (slot, env.index(a)) for slot, a in enumerate(self._envs.slot_agents(k)) if a is not None
            ]
            decided = self.vet(env, self._states[k], {i: int(proposed[k, slot]) for slot, i in slots})
            for slot, i in slots:
                out[k, slot] = decided[i]
        return out

    def vet(self, env: Any, st: PlanState, wanted: dict[int, int]) -> dict[int, int]:
        """The action each taxiing aircraft of ``env`` takes: its ``wanted`` one where the table allows."""
        sim: SurfaceSim = env.sim
        s, t = sim.s, sim.t
        for i in [i for i in st.plans if i not in sim.active]:
            del st.plans[i]
        unplanned = set()  # newcomers, and aircraft the engine kept off their plan: every plan is re-vetted
        for i in sim.active:  # no plan that matches where it is: it holds its cell until vetted
            pos = sim.movements[i].pos
            if st.planned_pos(i, t) != pos:
                st.plans[i] = (t, [pos, pos])
                unplanned.add(i)
        out: dict[int, int] = {}
        env.shield_decisions += len(sim.active)
        for i in sorted(sim.active):
            m = sim.movements[i]
            p, action = m.pos, wanted.get(i, 0)
            q = s.action_target(p, action)
            stuck = q == p and m.wait_run >= self.patience
            if not unplanned and not stuck and st.planned_pos(i, t + 1) == q:
                out[i] = action  # the move its reserved plan already makes, and nobody new to plan around
                continue
            others = reservations_of(sim, {j: v for j, v in st.plans.items() if j != i})
            forced = None if stuck else self._plan(env, others, i, first=q)
            if forced is not None:
                st.plans[i] = (t, forced)
                out[i] = action
                continue
            free = self._plan(env, others, i)
            st.plans[i] = (t, free if free is not None else [p] * HOLD_STEPS)
            nxt = p if free is None else free[1]
            out[i] = action_towards(s, p, nxt, m.goal)
            if nxt != q:
                if stuck:
                    env.shield_unstuck += 1
                else:
                    env.shield_overrides += 1
        return out

    def _plan(self, env: Any, res: Any, i: int, first: int | None = None) -> list[int] | None:
        sim: SurfaceSim = env.sim
        m, t = sim.movements[i], sim.t
        forbidden = None if first is None else (lambda p, q, t1: t1 == t + 1 and q != first)
        budget = (
            self.planner.max_expansions if first is None else min(self.planner.max_expansions, VET_EXPANSIONS)
        )
        return plan_path(sim, res, i, m.pos, m.goal, t, budget, self.planner.max_wait, forbidden)
