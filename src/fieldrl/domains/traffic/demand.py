"""Seeded, time-varying demand: vehicle ``flow``s and pedestrian ``personFlow``s for SUMO.

A demand *profile* is a list of periods (off-peak, peak, pedestrian surge, ...), each with
hourly rates per entry: vehicles on main-road entries, vehicles on side-street entries, and
pedestrians per entry. Each episode seed draws a multiplicative jitter per entry and mode, so
held-out seeds differ in demand and not only in SUMO's own random departures; SUMO's ``--seed``
draws the departures themselves (flows use ``probability``, i.e. Bernoulli arrivals each second).

Vehicles go from every entry to every other exit; a straight-on exit is ``through_weight``
times as likely as a turn. Pedestrians walk from every entry's sidewalk to another fringe,
from either sidewalk of their arm to either sidewalk of any arm (their own included), so
most trips use one or two crossings per junction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fieldrl.domains.traffic.networks import Fringe, cache_root, digest, fringes, write_atomic


@dataclass(frozen=True)
class Period:
    name: str
    duration_s: int
    vehicles_main: float  # veh/h per main-road entry
    vehicles_side: float  # veh/h per side-street entry
    pedestrians: float  # persons/h per entry


def _turn_weight(a: Fringe, b: Fringe, through_weight: float) -> float:
    """Weight of going from entry ``a`` to exit ``b`` (0 for a U-turn)."""
    if a.node == b.node:
        return 0.0
    out_heading = b.heading + math.pi  # travel direction on b's exit edge
    diff = abs((out_heading - a.heading + math.pi) % (2 * math.pi) - math.pi)
    return through_weight if diff < math.radians(30) else 1.0


def _od_shares(fr: Sequence[Fringe], through_weight: float) -> np.ndarray:
    w = np.array([[_turn_weight(a, b, through_weight) for b in fr] for a in fr])
    return w / w.sum(axis=1, keepdims=True)


def demand_xml(
    net_file: Path,
    periods: Sequence[Period],
    seed: int,
    jitter: float,
    through_weight: float = 3.0,
) -> str:
    """The ``.rou.xml`` text for one episode (deterministic in its arguments)."""
    fr = fringes(net_file)
    rng = np.random.default_rng([seed, 7101])
    veh_jit = rng.uniform(1 - jitter, 1 + jitter, size=len(fr))
    ped_jit = rng.uniform(1 - jitter, 1 + jitter, size=len(fr))
    shares = _od_shares(fr, through_weight)
    lines = [
        "<routes>",
        '  <vType id="car" vClass="passenger" length="5" minGap="2.5" maxSpeed="13.89"/>',
        '  <vType id="ped" vClass="pedestrian" speed="1.3" speedDev="0.1"/>',
    ]
    flows: list[tuple[float, str]] = []
    begin = 0
    for k, per in enumerate(periods):
        end = begin + per.duration_s
        for i, a in enumerate(fr):
            rate = (per.vehicles_main if a.main else per.vehicles_side) * veh_jit[i]
            for j, b in enumerate(fr):
                p = rate * shares[i, j] / 3600.0
                if p > 0:
                    flows.append(
                        (
                            begin,
                            f'  <flow id="v{k}_{a.node}_{b.node}" type="car" begin="{begin}" end="{end}" '
                            f'probability="{min(p, 1.0):.6f}" from="{a.entry}" to="{b.exit}" '
                            'departLane="best" departSpeed="max"/>',
                        )
                    )
            ped = per.pedestrians * ped_jit[i]
            # both sidewalks of the entry arm to both sidewalks of any arm (crossing the same arm too)
            legs = [
                (src, dst)
                for b in fr
                for src in (a.entry, a.exit)
                for dst in (b.entry, b.exit)
                if src != dst and not (b.node == a.node and src == a.entry and dst == a.exit)
            ]
            for n, (src, dst) in enumerate(legs):
                p = ped / len(legs) / 3600.0
                if p > 0:
                    flows.append(
                        (
                            begin,
                            f'  <personFlow id="p{k}_{a.node}_{n}" type="ped" begin="{begin}" '
                            f'end="{end}" probability="{min(p, 1.0):.6f}" departPos="random">'
                            f'<walk from="{src}" to="{dst}" arrivalPos="random"/></personFlow>',
                        )
                    )
        begin = end
    flows.sort(key=lambda x: x[0])
    lines += [f for _, f in flows]
    lines.append("</routes>")
    return "\n".join(lines) + "\n"


def demand_file(
    net_file: Path, periods: Sequence[Period], seed: int, jitter: float, through_weight: float = 3.0
) -> Path:
    """Write (or reuse) the episode's route file in the cache folder and return its path."""
    key = digest([str(net_file), [p.__dict__ for p in periods], seed, jitter, through_weight])
    path = cache_root() / "demand" / f"{net_file.stem.split('.')[0]}-{key}.rou.xml"
    if not path.exists():
        write_atomic(path, demand_xml(net_file, periods, seed, jitter, through_weight))
    return path


def nominal_vehicles_xml(net_file: Path, period: Period, through_weight: float = 3.0) -> str:
    """One hour of evenly spaced vehicles at ``period``'s mean rates, with explicit routes.

    Input for SUMO's ``tlsCycleAdaptation.py`` (Webster timing), which reads ``<vehicle>``
    elements with routes, not flows.
    """
    import sumolib

    net = sumolib.net.readNet(str(net_file))
    fr = fringes(net_file)
    shares = _od_shares(fr, through_weight)
    vehicles: list[tuple[float, str]] = []
    for i, a in enumerate(fr):
        rate = period.vehicles_main if a.main else period.vehicles_side
        for j, b in enumerate(fr):
            count = int(round(rate * shares[i, j]))
            if count == 0:
                continue
            path, _ = net.getShortestPath(net.getEdge(a.entry), net.getEdge(b.exit))
            edges = " ".join(e.getID() for e in path)
            for n in range(count):
                t = (n + 0.5) * 3600.0 / count
                vehicles.append(
                    (
                        t,
                        f'<vehicle id="w{a.node}_{b.node}_{n}" depart="{t:.1f}">'
                        f'<route edges="{edges}"/></vehicle>',
                    )
                )
    vehicles.sort(key=lambda x: x[0])
    return "<routes>\n" + "\n".join(v for _, v in vehicles) + "\n</routes>\n"
