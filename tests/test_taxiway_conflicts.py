"""The surface engine's conflict detector: each kind is found, and nothing is found where there is none."""

from __future__ import annotations

import numpy as np
import pytest

from fieldrl.simulators.airport.engine import Movement, SurfaceSim, TrafficConfig
from fieldrl.simulators.airport.layout import build_surface, layout_from_dict

LAYOUT = {
    "name": "conflict test",
    "runways": [{"id": "R", "use": "mixed"}],
    "nodes": [
        {"id": "S1", "kind": "stand", "x": 0, "y": 120},
        {"id": "Q", "kind": "intersection", "x": -60, "y": 0},
        {"id": "A", "kind": "intersection", "x": 0, "y": 0},
        {"id": "B", "kind": "intersection", "x": 300, "y": 0},
        {"id": "H", "kind": "hold_short", "runway": "R", "x": 300, "y": -120},
        {"id": "RX", "kind": "runway_crossing", "runway": "R", "x": 300, "y": -240},
        {"id": "H2", "kind": "hold_short", "runway": "R", "x": 300, "y": -360},
        {"id": "S2", "kind": "stand", "x": 300, "y": -480},
        {"id": "E", "kind": "runway_entry", "runway": "R", "x": 0, "y": -120},
        {"id": "X", "kind": "runway_exit", "runway": "R", "x": 600, "y": 0},
    ],
    "edges": [
        ["S1", "A"],
        ["Q", "A"],
        ["A", "B"],
        ["B", "H"],
        ["H", "RX"],
        ["RX", "H2"],
        ["H2", "S2"],
        ["A", "E"],
        ["X", "B"],
    ],
}


def make_sim(separation: int = 2) -> SurfaceSim:
    surface = build_surface(layout_from_dict(LAYOUT), cell_m=60.0, separation=separation)
    return SurfaceSim(surface, TrafficConfig(movements_per_hour=1.0))


def node(sim: SurfaceSim, name: str) -> int:
    return sim.s.layout.index[name]


def interior(sim: SurfaceSim, u: str, v: str) -> list[int]:
    """Positions inside segment u-v, in order from u, travelling toward v."""
    s = sim.s
    ku, kv = node(sim, u), node(sim, v)
    for _, first, far in s.node_moves[ku]:
        if far == kv:
            out, p = [], first
            while s.pos_node[p] < 0:
                out.append(p)
                p = int(s.next_interior[p])
            return out
    raise KeyError((u, v))


def place(sim: SurfaceSim, *positions: int) -> None:
    """Put one aircraft at each position (goal S2), with no runway activity."""
    sim.movements = [
        Movement(i, False, 0, node(sim, "S2"), -1, 0, np.arange(2), pos=p, spawn_t=0)
        for i, p in enumerate(positions)
    ]
    sim.active = list(range(len(positions)))
    sim.pending = []
    sim._active_keys = set()
    sim.windows = {0: []}
    sim.t = 50


def kinds(found) -> list[str]:
    return sorted(k for _, _, k in found)


def test_layout_cells_are_as_expected():
    sim = make_sim()
    assert len(interior(sim, "A", "B")) == 4  # 300 m in 60 m cells: 5 hops
    assert len(interior(sim, "H", "RX")) == 1
    runway_cells = set(np.flatnonzero(sim.s.cell_runway >= 0))
    assert sim.s.pos_cell[node(sim, "RX")] in runway_cells
    assert sim.s.pos_cell[interior(sim, "H", "RX")[0]] in runway_cells
    assert sim.s.pos_cell[node(sim, "H")] not in runway_cells


def test_same_cell_is_a_separation_conflict():
    sim = make_sim()
    ab = interior(sim, "A", "B")
    place(sim, ab[1], ab[1])
    assert kinds(sim.conflicts()) == ["separation"]


def test_adjacent_cells_conflict_but_two_cells_apart_do_not():
    sim = make_sim()
    ab = interior(sim, "A", "B")
    place(sim, ab[0], ab[1])
    assert kinds(sim.conflicts()) == ["separation"]
    place(sim, ab[0], ab[2])
    assert sim.conflicts() == set()
    place(sim, node(sim, "A"), ab[1])  # a node and an interior cell two hops apart
    assert sim.conflicts() == set()


def test_separation_minimum_of_one_cell_only_flags_the_same_cell():
    sim = make_sim(separation=1)
    ab = interior(sim, "A", "B")
    place(sim, ab[0], ab[1])
    assert sim.conflicts() == set()


def test_opposite_directions_in_one_segment_is_head_on_even_when_far_apart():
    sim = make_sim()
    ab, ba = interior(sim, "A", "B"), interior(sim, "B", "A")
    place(sim, ab[0], ba[0])  # first cell from A heading east, first cell from B heading west
    assert kinds(sim.conflicts()) == ["head_on"]


def test_same_direction_far_apart_is_no_conflict():
    sim = make_sim()
    ab = interior(sim, "A", "B")
    place(sim, ab[0], ab[3])
    assert sim.conflicts() == set()


def test_swapping_cells_in_one_step_is_head_on():
    sim = make_sim(separation=1)
    a, q = node(sim, "A"), node(sim, "Q")
    place(sim, q, a)  # after the step: 0 went A->Q, 1 went Q->A
    assert kinds(sim.conflicts({0: (a, q), 1: (q, a)})) == ["head_on"]
    assert sim.conflicts({0: (a, q), 1: (a, a)}) == set()


@pytest.mark.parametrize("where", ["RX", "H-RX"])
def test_on_an_active_runway_is_an_incursion(where):
    sim = make_sim()
    p = node(sim, "RX") if where == "RX" else interior(sim, "H", "RX")[0]
    place(sim, p)
    sim.windows = {0: [[45, 60, 99]]}  # someone else's take-off roll
    assert kinds(sim.conflicts()) == ["runway"]


def test_no_incursion_when_the_runway_is_quiet_or_the_aircraft_holds_short():
    sim = make_sim()
    place(sim, node(sim, "RX"))
    sim.windows = {0: [[10, 20, 99], [51, 60, 98]]}  # before and after now (t = 50)
    assert sim.conflicts() == set()
    place(sim, node(sim, "H"))
    sim.windows = {0: [[45, 60, 99]]}
    assert sim.conflicts() == set()
    place(sim, node(sim, "RX"))
    sim.windows = {0: [[45, 60, 0]]}  # its own window does not count
    assert sim.conflicts() == set()


def test_conflict_events_are_counted_once_while_they_last():
    sim = make_sim()
    ab = interior(sim, "A", "B")
    place(sim, ab[0], ab[1])
    sim.movements[0].goal = sim.movements[1].goal = node(sim, "B")
    res = sim.step({0: 0, 1: 0})  # both hold: still adjacent
    assert res.new_conflicts == {0: 1, 1: 1} and sim.conflict_counts["separation"] == 1
    res = sim.step({0: 0, 1: 0})
    assert res.new_conflicts == {} and res.in_conflict == {0: True, 1: True}
    assert sim.conflict_counts["separation"] == 1
    sim.step({0: 0, 1: 1})  # 1 moves away: 2 cells apart
    res = sim.step({0: 1, 1: 0})  # 0 closes up again: a new event
    assert sim.conflict_counts["separation"] == 2 and res.new_conflicts == {0: 1, 1: 1}


def test_takeoff_waits_for_the_first_gap_long_enough_for_its_roll():
    sim = make_sim()
    m = sim.movements[0]
    m.runway, roll = 0, sim.cfg.roll_steps
    sim.t = 100
    # busy until 105, a gap too short for the roll, then busy 108 + roll .. 130, then free
    sim.windows = {0: [[120, 130, 98], [90, 105, 97], [105 + roll - 1, 120, 96]]}
    sim._takeoff(m)
    assert m.takeoff_t == 130 and sim.windows[0][-1] == [130, 130 + roll, m.index]
    sim.t, sim.windows = 100, {0: [[100 + roll, 140, 97]]}  # exactly one roll free from now
    sim._takeoff(m)
    assert m.takeoff_t == 100
