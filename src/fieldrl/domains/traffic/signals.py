"""One signalised junction: its links, green stages, and a safe stage-switching state machine.

Stages are the *major green phases* of the junction's SUMO program (phases without yellow that
are not merely the previous phase with some greens withdrawn, i.e. not a pedestrian clearance),
plus, optionally, an exclusive pedestrian stage (every vehicle link red, every crossing green).

Switching from stage ``a`` to ``b`` always runs, second by second:

1. pedestrian clearance (``ped_clearance_s``): crossings green in ``a`` but not in ``b`` turn red
   so nobody starts crossing, while vehicle links keep their green and people already on the
   crossing finish (SUMO's own programs have the same 5 s interval before the yellow);
2. yellow (``yellow_s``): vehicle links losing their right of way show yellow;
3. all-red (``all_red_s``): every link losing its right of way is red;
4. green of ``b``, held for at least ``min_green_s`` and at most ``max_green_s``.

A vehicle link loses its right of way when it is green in ``a`` and not in ``b``, and also when
it goes from priority green ``G`` to permissive ``g`` (a protected left turn becoming a left turn
that yields to oncoming traffic now given green): it gets the yellow and all-red like any other.
Links green in both stages otherwise stay green throughout. When nothing loses its right of way
(``b`` only adds greens, or every interval is 0 s) the switch is immediate. After ``max_green_s``
seconds of green the controller moves on to the next stage by itself if nobody asked for another,
so a stage is never held longer, whatever the policy or the program. Written here because
sumo-rl's ``TrafficSignal`` treats SUMO's pedestrian-clearance phase as a green phase of its own
and gives pedestrians only the vehicle yellow to clear.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GREEN = "Gg"


@dataclass
class SignalLayout:
    """What a junction controls, read once from the running simulation."""

    tls: str
    states: list[str]  # one state string per stage
    vehicle_links: list[int]
    crossing_links: list[int]
    in_lanes: list[str]  # incoming vehicle lanes, in link order
    crossings: list[str]  # crossing edge ids (``:A0_c0``), in link order
    walkingareas: set[str]
    link_lanes: list[tuple[str, str]]  # (incoming lane, outgoing lane) per vehicle link
    lane_capacity: dict[str, float] = field(default_factory=dict)
    #: per incoming lane: lanes upstream of it within ``QUEUE_REACH_M`` (through unsignalised nodes)
    #: and how many incoming lanes of the junction share them (see ``TrafficEnv.queue``)
    upstream: dict[str, tuple[list[str], int]] = field(default_factory=dict)

    @property
    def n_stages(self) -> int:
        return len(self.states)

    def green(self, stage: int) -> set[int]:
        return {i for i, c in enumerate(self.states[stage]) if c in GREEN}

    def crossing_served(self, stage: int) -> list[bool]:
        return [self.states[stage][i] in GREEN for i in self.crossing_links]


def _major_greens(phases: list[str]) -> list[str]:
    out: list[str] = []
    for k, state in enumerate(phases):
        if "y" in state or not any(c in GREEN for c in state):
            continue
        prev = phases[k - 1]
        greens = {i for i, c in enumerate(state) if c in GREEN}
        prev_greens = {i for i, c in enumerate(prev) if c in GREEN}
        if "y" not in prev and greens < prev_greens:
            continue  # the previous green with some links withdrawn: a clearance phase
        if state not in out:
            out.append(state)
    return out


def read_layout(sim: Any, tls: str, pedestrian_stage: bool) -> SignalLayout:
    """Build the layout of ``tls`` from the simulation's current (netconvert) program."""
    logic = sim.trafficlight.getAllProgramLogics(tls)[0]
    states = _major_greens([p.state for p in logic.phases])
    links = sim.trafficlight.getControlledLinks(tls)
    vehicle_links, crossing_links, in_lanes, crossings, link_lanes = [], [], [], [], []
    walkingareas: set[str] = set()
    for i, group in enumerate(links):
        if not group:
            continue
        src, dst, _via = group[0]
        if src.startswith(":") and "_w" in src:
            crossing_links.append(i)
            crossings.append(dst.rsplit("_", 1)[0])
            walkingareas.add(src.rsplit("_", 1)[0])
        else:
            vehicle_links.append(i)
            link_lanes.append((src, dst))
            if src not in in_lanes:
                in_lanes.append(src)
    if pedestrian_stage and crossing_links:
        n = len(states[0])
        walk = ["r"] * n
        for i in crossing_links:
            walk[i] = "G"
        states.append("".join(walk))
    capacity = {lane: max(sim.lane.getLength(lane) / 7.5, 1.0) for lane in in_lanes}
    return SignalLayout(
        tls, states, vehicle_links, crossing_links, in_lanes, crossings, walkingareas, link_lanes, capacity
    )


@dataclass(frozen=True)
class Timing:
    min_green_s: int = 10
    max_green_s: int = 90
    yellow_s: int = 3
    all_red_s: int = 1
    ped_clearance_s: int = 5


class StageController:
    """Second-by-second signal state for one junction under fieldrl control."""

    def __init__(self, layout: SignalLayout, timing: Timing):
        self.layout = layout
        self.timing = timing
        self.reset(0)

    def reset(self, stage: int) -> None:
        self.stage = stage  # current (or, in a transition, previous) green stage
        self.target = stage
        self.green_time = 0  # seconds of green so far in the current stage
        self._plan: list[str] = []  # remaining transition seconds, as states

    @property
    def in_transition(self) -> bool:
        return bool(self._plan)

    def allowed(self) -> list[bool]:
        """Which stages may be requested now (the action mask)."""
        n = self.layout.n_stages
        if self.in_transition:
            return [k == self.target for k in range(n)]
        if self.green_time < self.timing.min_green_s:
            return [k == self.stage for k in range(n)]
        if self.green_time >= self.timing.max_green_s and n > 1:
            return [k != self.stage for k in range(n)]
        return [True] * n

    def request(self, stage: int) -> None:
        """Ask for ``stage``; disallowed requests keep the current plan (next stage at max green).

        A stage this junction does not have (actions are padded to the network's largest junction)
        counts as disallowed.
        """
        stage = int(stage)
        mask = self.allowed()
        if not (0 <= stage < len(mask) and mask[stage]):
            if self.in_transition or self.green_time < self.timing.min_green_s:
                return
            stage = self._next_stage()  # max green reached: move on
        if stage != self.stage and not self.in_transition:
            self._start(stage)

    def _next_stage(self) -> int:
        return (self.stage + 1) % self.layout.n_stages

    def _start(self, stage: int) -> None:
        """Begin the switch to ``stage``; with nothing to clear it happens at once."""
        self._plan = self._transition(self.stage, stage)
        self.target = stage
        if not self._plan:
            self.stage, self.green_time = stage, 0

    def keeps_right_of_way(self, a: int, b: int) -> list[bool]:
        """Per link: green in stage ``a`` and still green in ``b``, not losing priority (``G`` -> ``g``)."""
        old, new = self.layout.states[a], self.layout.states[b]
        crossing = set(self.layout.crossing_links)
        return [
            o in GREEN and n in GREEN and not (i not in crossing and o == "G" and n == "g")
            for i, (o, n) in enumerate(zip(old, new, strict=True))
        ]

    def _transition(self, a: int, b: int) -> list[str]:
        old = self.layout.states[a]
        crossing = set(self.layout.crossing_links)
        keep = self.keeps_right_of_way(a, b)
        clear = "".join(
            "r" if (i in crossing and not keep[i] and o in GREEN) else o for i, o in enumerate(old)
        )
        yellow = "".join(
            o if keep[i] else ("y" if (o in GREEN and i not in crossing) else "r") for i, o in enumerate(old)
        )
        red = "".join(o if keep[i] else "r" for i, o in enumerate(old))
        plan: list[str] = []
        if clear != old:
            plan += [clear] * self.timing.ped_clearance_s
        if "y" in yellow:
            plan += [yellow] * self.timing.yellow_s
        if red != old:  # something loses its right of way: clear the junction before b's greens
            plan += [red] * self.timing.all_red_s
        return plan

    def tick(self) -> str:
        """Advance one second; return the state to show during it."""
        at_max = self.green_time >= self.timing.max_green_s and self.layout.n_stages > 1
        if not self._plan and at_max:
            self._start(self._next_stage())  # nobody asked for another stage: max green ends it
        if self._plan:
            state = self._plan.pop(0)
            if not self._plan:
                self.stage, self.green_time = self.target, 0
            return state
        self.green_time += 1
        return self.layout.states[self.stage]
