"""Prioritized planning's next move for every taxiing aircraft, kept along whatever moves are made.

With ``params.advice`` the env shows each aircraft the move the prioritized planner would make
now (one-hot, after the rest of the observation), and the learned policy may follow it or not.
A policy that always follows it taxis like prioritized planning; what it adds is only where it
chose otherwise. This is the taxiway form of rail's dispatcher advice and traffic's Webster
advice: a clone of the planner without it failed (the planner's holds depend on a reservation
table the observation shows only in part, see ``docs/taxiway.md``), a clone with it copies one
feature.

The planner keeps a space-time plan per aircraft, as :class:`~fieldrl.domains.taxiway.heuristics.
Prioritized` does, but against the moves actually made: an aircraft that is not where its plan
says (a newcomer, or one whose policy did otherwise) holds its cell while the others are
re-planned, then gets a new plan, in order of appearance, around everyone's current plans (the
runtime shield does the same, :mod:`fieldrl.domains.taxiway.shield`). When every aircraft
follows its advice no plan is redone, and the moves are prioritized planning's.
"""

from __future__ import annotations

from fieldrl.domains.taxiway.heuristics import PlanState, reservations_of
from fieldrl.domains.taxiway.shield import HOLD_STEPS
from fieldrl.simulators.airport.engine import SurfaceSim
from fieldrl.simulators.airport.planning import plan_path


class PlannerAdvice:
    """The prioritized planner's plans for one episode, and the move each one advises now.

    :param max_expansions: A* node expansions per plan (prioritized planning's default).
    :param max_wait: steps of waiting a plan may contain.
    """

    def __init__(self, max_expansions: int = 30000, max_wait: int = 400):
        self.max_expansions = max_expansions
        self.max_wait = max_wait
        self.state = PlanState()
        #: plans made since the last reset (the cost of advising a policy that does otherwise)
        self.replans = 0

    def reset(self) -> None:
        self.state = PlanState()
        self.replans = 0

    def advise(self, sim: SurfaceSim) -> dict[int, int]:
        """Aircraft -> the action toward its planned next position (0, hold, if it has no plan)."""
        t, st = sim.t, self.state
        st.plans = {i: v for i, v in st.plans.items() if i in sim.active}
        off = [i for i in sorted(sim.active) if st.planned_pos(i, t) != sim.movements[i].pos]
        for i in off:  # it holds its cell until re-planned, so the others plan around it
            pos = sim.movements[i].pos
            st.plans[i] = (t, [pos, pos])
        for i in off:
            m = sim.movements[i]
            others = reservations_of(sim, {j: v for j, v in st.plans.items() if j != i})
            plan = plan_path(sim, others, i, m.pos, m.goal, t, self.max_expansions, self.max_wait)
            st.plans[i] = (t, plan if plan is not None else [m.pos] * HOLD_STEPS)
            self.replans += 1
        return st.moves(sim)
