"""Stage transitions honour min/max green and clearance for every signal program, not only fieldrl's own.

A property test over every signal of every RESCO network sumo-rl ships and of fieldrl's generated
networks: random stage requests at random decision intervals and timings (``all_red_s: 0``
included), and after every simulated second the shown states must obey the rules below. The
controller logic needs no simulation, so the layouts are read from the ``.net.xml`` files the way
``signals.read_layout`` reads them from SUMO (a stand-in object answers its three TraCI calls).
One short SUMO run on a RESCO junction with a protected-left stage checks the same in the simulator.
"""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fieldrl.domains.traffic.networks import LAYOUTS, NetworkOptions, build_network
from fieldrl.domains.traffic.signals import GREEN, SignalLayout, StageController, Timing, read_layout

RESCO = Path(importlib.util.find_spec("sumo_rl").origin).parent / "nets" / "RESCO"
RESCO_NETS = sorted(RESCO.glob("*/*.net.xml"))


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FIELDRL_TRAFFIC_DIR", str(tmp_path_factory.getbasetemp() / "traffic-cache"))


class NetXml:
    """The three TraCI calls ``read_layout`` makes, answered from a ``.net.xml`` file."""

    def __init__(self, path: Path):
        root = ET.parse(path).getroot()
        self.logics: dict[str, list[str]] = {}
        for logic in root.iter("tlLogic"):
            self.logics.setdefault(logic.get("id"), [p.get("state") for p in logic.iter("phase")])
        self.links: dict[str, dict[int, list[tuple[str, str, str]]]] = {}
        for c in root.iter("connection"):
            if c.get("tl") is not None:
                link = (f"{c.get('from')}_{c.get('fromLane')}", f"{c.get('to')}_{c.get('toLane')}", "")
                self.links.setdefault(c.get("tl"), {}).setdefault(int(c.get("linkIndex")), []).append(link)
        lengths = {lane.get("id"): float(lane.get("length")) for lane in root.iter("lane")}
        phase = SimpleNamespace
        self.trafficlight = SimpleNamespace(
            getAllProgramLogics=lambda tls: [phase(phases=[phase(state=s) for s in self.logics[tls]])],
            getControlledLinks=lambda tls: [
                self.links[tls].get(i, []) for i in range(len(self.logics[tls][0]))
            ],
        )
        self.lane = SimpleNamespace(getLength=lambda lane: lengths.get(lane, 7.5))


def layouts(path: Path, pedestrian_stage: bool = True) -> list[SignalLayout]:
    sim = NetXml(path)
    return [read_layout(sim, tls, pedestrian_stage) for tls in sorted(sim.logics)]


def drive(ctl: StageController, rng: np.random.Generator, seconds: int, decision_s: int) -> list[tuple]:
    """Random requests every ``decision_s`` s; returns per second ``(shown state, stage, green_time)``."""
    out = []
    for t in range(seconds):
        if t % decision_s == 0:
            ctl.request(int(rng.integers(ctl.layout.n_stages)))
        out.append((ctl.tick(), ctl.stage, ctl.green_time))
    return out


def check(layout: SignalLayout, timing: Timing, trace: list[tuple]) -> int:
    """Assert the transition rules on one junction's trace; returns the number of completed switches.

    - a stage's green is shown at most ``max_green_s`` seconds in a row, at least ``min_green_s``
      before another stage's;
    - a switch completes: at most ``ped_clearance_s + yellow_s + all_red_s`` seconds between greens;
    - a vehicle link losing priority (green to not green, or ``G`` to ``g``) shows yellow for
      ``yellow_s`` seconds;
    - a link turns green only after every link that lost its right of way has cleared (yellow, then
      ``all_red_s``; crossings ``ped_clearance_s + all_red_s``).
    """
    crossing = set(layout.crossing_links)
    shown = [s for s, *_ in trace]
    n = len(layout.states[0])
    longest_switch = timing.ped_clearance_s + timing.yellow_s + timing.all_red_s
    lost_at: dict[int, int] = {}  # link -> second it last lost its right of way
    switches, held, between, last_stage = 0, 0, 0, trace[0][1]
    for t, (state, stage, green_time) in enumerate(trace):
        assert green_time <= timing.max_green_s, (layout.tls, t, green_time)
        if state == layout.states[stage]:
            if stage != last_stage:
                switches += 1
                assert held >= timing.min_green_s, (layout.tls, t, "left before min green", held)
                held, last_stage = 0, stage
            held, between = held + 1, 0
            assert held <= timing.max_green_s or layout.n_stages == 1, (layout.tls, t, "held", held)
        else:
            between += 1
            assert between <= longest_switch, (layout.tls, t, "switch never completes", state)
        if t == 0:
            continue
        prev = shown[t - 1]
        for i in range(n):
            was, now = prev[i], state[i]
            loses = (was in GREEN and now not in GREEN) or (i not in crossing and was == "G" and now == "g")
            if loses:
                lost_at[i] = t
                if i not in crossing and timing.yellow_s > 0:
                    assert now == "y", (layout.tls, t, i, prev, state)  # priority ends with a yellow
            if was == "y" and now != "y":
                assert t - lost_at.get(i, -(10**9)) >= timing.yellow_s, (layout.tls, t, i, "short yellow")
            if was not in GREEN and now in GREEN:  # a new green: everything that lost green has cleared
                for j, when in lost_at.items():
                    need = timing.ped_clearance_s + timing.all_red_s if j in crossing else timing.all_red_s
                    if j not in crossing and shown[when][j] == "y":
                        need += timing.yellow_s
                    if t - when < need and state[j] not in GREEN:
                        pytest.fail(f"{layout.tls} t={t}: link {i} green {t - when} s after link {j} lost it")
    return switches


TIMINGS = [
    Timing(min_green_s=5, max_green_s=50, yellow_s=3, all_red_s=0, ped_clearance_s=5),  # RESCO's rules
    Timing(min_green_s=10, max_green_s=90, yellow_s=3, all_red_s=1, ped_clearance_s=5),  # fieldrl's defaults
    Timing(min_green_s=1, max_green_s=7, yellow_s=0, all_red_s=0, ped_clearance_s=0),  # nothing to clear
]


def run_property(path: Path, seconds: int = 600) -> tuple[int, int]:
    rng = np.random.default_rng(abs(hash(path.name)) % 2**32)
    signals = switches = 0
    for layout in layouts(path):
        for timing in TIMINGS:
            ctl = StageController(layout, timing)
            decision_s = int(rng.integers(1, 8))
            done = check(layout, timing, drive(ctl, rng, seconds, decision_s))
            if layout.n_stages > 1:
                assert done > 0, (layout.tls, "never switched")
            switches += done
        signals += 1
    return signals, switches


@pytest.mark.parametrize("path", RESCO_NETS, ids=[p.parent.name for p in RESCO_NETS])
def test_every_resco_signal_honours_min_max_green_and_clearance_under_random_requests(path: Path) -> None:
    signals, switches = run_property(path)
    assert signals >= 1 and switches > signals


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_generated_signal_honours_min_max_green_and_clearance_under_random_requests(
    layout: str,
) -> None:
    signals, switches = run_property(build_network(NetworkOptions(layout=layout, lanes=3)))
    assert signals == len(NetworkOptions(layout=layout).junction_ids()) and switches > signals


def test_resco_network_sumo_rl_ships_has_stages_that_only_add_greens() -> None:
    """What broke before: protected left (G) -> through plus permissive left (g), all_red_s 0."""
    layout = next(x for x in layouts(RESCO / "cologne3" / "cologne3.net.xml") if x.tls == "360082")
    a, b = layout.states.index("rrGGrrrrrrG"), layout.states.index("GGggrrrGGGg")
    assert layout.green(a) <= layout.green(b)
    ctl = StageController(layout, TIMINGS[0])
    ctl.reset(a)
    for _ in range(5):
        ctl.tick()
    ctl.request(b)
    shown = [ctl.tick() for _ in range(4)]
    assert shown[:3] == ["rryyrrrrrry"] * 3  # the protected left loses priority: yellow first
    assert shown[3] == "GGggrrrGGGg" and ctl.stage == b


def test_a_switch_that_clears_nothing_happens_at_once() -> None:
    layout = SignalLayout("J", ["GGrr", "GGGG"], [0, 1, 2, 3], [], ["a", "b"], [], set(), [])
    ctl = StageController(layout, Timing(min_green_s=2, max_green_s=9, yellow_s=3, all_red_s=2))
    ctl.tick(), ctl.tick()
    ctl.request(1)
    assert ctl.stage == 1 and not ctl.in_transition and ctl.tick() == "GGGG"


def test_max_green_ends_a_stage_even_when_nobody_asks() -> None:
    layout = SignalLayout("J", ["GGrr", "rrGG"], [0, 1, 2, 3], [], ["a", "b"], [], set(), [])
    ctl = StageController(layout, Timing(min_green_s=2, max_green_s=9, yellow_s=3, all_red_s=1))
    shown = [ctl.tick() for _ in range(14)]
    assert shown[:9] == ["GGrr"] * 9 and shown[9:12] == ["yyrr"] * 3 and shown[12] == "rrrr"
    assert shown[13] == "rrGG" and ctl.stage == 1


def test_in_sumo_a_protected_left_junction_keeps_switching_with_no_all_red() -> None:
    """cologne3 (three junctions with protected lefts), RESCO timing, random requests for 300 s."""
    from fieldrl.domains.traffic.env import TrafficEnv
    from fieldrl.domains.traffic.params import PeriodModel, TrafficParams

    params = TrafficParams(
        net_file="sumo-rl:RESCO/cologne3/cologne3.net.xml",
        route_file="sumo-rl:RESCO/cologne3/cologne3.rou.xml",
        begin_s=25200,
        periods=[PeriodModel(name="am", duration_s=300, vehicles_main=0, vehicles_side=0, pedestrians=0)],
        min_green_s=5,
        max_green_s=50,
        yellow_s=3,
        all_red_s=0,
        decision_s=5,
    )
    env = TrafficEnv(params)
    rng = np.random.default_rng(0)
    try:
        env.reset(seed=1)
        seen: dict[str, list[str]] = {a: [] for a in env.possible_agents}
        while env.agents:
            env.step({a: int(rng.integers(env.n_stages)) for a in env.agents})
            for a in env.possible_agents:
                seen[a].append(env._handle.trafficlight.getRedYellowGreenState(a))
        for agent, states in seen.items():
            stages = env.controllers[agent].layout.states
            assert len({s for s in states if s in stages}) >= 2, agent  # it moves between stages
            run, longest = 0, 0
            for s, nxt in zip(states, states[1:], strict=False):
                run = run + 1 if s == nxt else 0
                longest = max(longest, run)
            assert longest * params.decision_s <= params.max_green_s + params.decision_s, agent
    finally:
        env.close()
