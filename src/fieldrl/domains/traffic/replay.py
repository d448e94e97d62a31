"""Replay frames of a traffic-signal episode (``fieldrl replay``): the network's real geometry from its
SUMO ``.net.xml`` (lanes, sidewalks, crossings, junction areas), each signal's lights at the stop lines
and crossings with the stage it shows, vehicles (queues drawn to scale: halting vehicles x 7.5 m back
from the stop line), pedestrians, and how many people wait at each crossing.

The geometry is read with sumolib (plain XML, no simulation: libsumo runs one simulation per process,
and this never starts one) once per network file and process; the same arrays go into every snapshot
of that network, so a long episode holds them once. What changes (signals, queues, people) is read
from the running simulation at each snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fieldrl.reportkit.figures import legend_below

if TYPE_CHECKING:
    from fieldrl.domains.multiagent import ParallelLockstepEnvs
    from fieldrl.domains.traffic.env import TrafficEnv

#: metres of road a halting vehicle takes in a queue (SUMO's default length 5 m plus 2.5 m gap)
VEHICLE_SPACE_M = 7.5
#: metres of road shown around the signalised junctions (queues further back are counted, not drawn)
VIEW_REACH_M = 100.0
#: metres at the end of a signalised lane coloured as its light
LIGHT_M = 6.0
RED, YELLOW, GREEN = 0, 1, 2
SIGNAL_COLORS = np.array(["#d62728", "#ffbf00", "#2ca02c"])
QUEUE_COLOR, VEHICLE_COLOR, PERSON_COLOR, WAIT_COLOR = "#5a8fc8", "#202020", "#8c4fbf", "#8c4fbf"
_GEOMETRY: dict[tuple[str, int], dict[str, Any]] = {}


def _band(shape: np.ndarray, width: float) -> np.ndarray:
    """A polyline widened to a polygon ``width`` metres wide (a lane's, sidewalk's or crossing's surface)."""
    d = np.diff(shape, axis=0)
    d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-9)
    normal = np.c_[-d[:, 1], d[:, 0]]
    at_points = np.vstack([normal[:1], normal[:-1] + normal[1:], normal[-1:]])
    at_points /= np.maximum(np.linalg.norm(at_points, axis=1, keepdims=True), 1e-9)
    offset = 0.5 * width * at_points
    return np.vstack([shape + offset, (shape - offset)[::-1]])


def _signal(chars: str) -> int:
    """One light for a set of links: green if any may go, else yellow if any shows it, else red."""
    if any(c in "Gg" for c in chars):
        return GREEN
    return YELLOW if any(c in "yY" for c in chars) else RED


def _geometry(env: TrafficEnv) -> dict[str, Any]:
    """Lanes, sidewalks, crossings, junction areas and stop lines of ``env``'s network (cached per file)."""
    import sumolib

    path = Path(env.net_file)
    key = (str(path), path.stat().st_mtime_ns)
    if key in _GEOMETRY:
        return _GEOMETRY[key]
    net = sumolib.net.readNet(str(path), withInternal=True)
    lanes, lane_ids, surfaces, widths, walks, crossings = [], [], [], [], [], {}
    for edge in net.getEdges(withInternal=True):
        function = edge.getFunction()
        for lane in edge.getLanes():
            shape = np.asarray(lane.getShape(), dtype=float)[:, :2]
            if len(shape) < 2:
                continue
            if function == "crossing":
                crossings[edge.getID()] = _band(shape, lane.getWidth())
            elif function in ("", "normal"):
                if lane.allows("passenger"):
                    lanes.append(shape)
                    lane_ids.append(lane.getID())
                    surfaces.append(_band(shape, lane.getWidth()))
                    widths.append(float(lane.getWidth()))
                elif lane.allows("pedestrian"):
                    walks.append(_band(shape, lane.getWidth()))
    junctions = [
        np.asarray(node.getShape(), dtype=float)[:, :2]
        for node in net.getNodes()
        if node.getType() != "dead_end" and len(node.getShape()) >= 3
    ]
    # lights: the last metres of each signalised incoming lane, coloured; crossings the signals serve
    shapes = dict(zip(lane_ids, lanes, strict=True))
    lane_width = dict(zip(lane_ids, widths, strict=True))
    lights, light_links, cross_shapes, cross_links, cross_ids, centres = [], [], [], [], [], []
    for j, lay in enumerate(env.layouts):
        ends = []
        for lane in lay.in_lanes:
            if lane not in shapes:
                continue
            shape = shapes[lane]
            lights.append(_band(_queue_line(shape, LIGHT_M), lane_width[lane]))
            end = shape[-1]
            light_links.append(
                (j, [lay.vehicle_links[k] for k, (src, _) in enumerate(lay.link_lanes) if src == lane])
            )
            ends.append(end)
        for crossing, link in zip(lay.crossings, lay.crossing_links, strict=True):
            if crossing in crossings:
                cross_shapes.append(crossings[crossing])
                cross_links.append((j, link))
                cross_ids.append(crossing)
        centres.append(np.mean(ends, axis=0) if ends else np.zeros(2))
    every = np.concatenate([*lanes, *walks]) if lanes or walks else np.zeros((1, 2))
    extent = np.r_[every.min(axis=0), every.max(axis=0)]
    if centres:  # the signalised junctions and the queue reach around them, within the network
        near = np.asarray(centres)
        extent = np.r_[
            np.maximum(extent[:2], near.min(axis=0) - VIEW_REACH_M),
            np.minimum(extent[2:], near.max(axis=0) + VIEW_REACH_M),
        ]
    geometry = {
        "lanes": lanes,
        "lane_ids": lane_ids,
        "lane_surfaces": surfaces,
        "lane_widths": np.asarray(widths, dtype=float),
        "walks": walks,
        "junctions": junctions,
        "lights": lights,
        "crossings": cross_shapes,
        "junction_xy": np.asarray(centres, dtype=float).reshape(-1, 2),
        "junction_ids": [lay.tls for lay in env.layouts],
        "extent": extent,
        # which links light each bar and crossing (read by snapshot, not drawn)
        "_light_links": light_links,
        "_cross_links": cross_links,
        "_cross_ids": cross_ids,
    }
    _GEOMETRY[key] = geometry
    return geometry


def snapshot(envs: ParallelLockstepEnvs, index: int) -> dict[str, Any]:
    """Episode ``index`` now: lights, the stage each junction shows, halting vehicles per lane, vehicle
    and pedestrian positions, people waiting at each crossing."""
    env: TrafficEnv = envs.envs[index]
    h = env._handle  # the running simulation (libsumo or TraCI)
    if h is None:
        return {}
    geo = _geometry(env)
    states = [h.trafficlight.getRedYellowGreenState(lay.tls) for lay in env.layouts]
    light_signal = [_signal("".join(states[j][k] for k in links)) for j, links in geo["_light_links"]]
    cross_signal = [_signal(states[j][k]) for j, k in geo["_cross_links"]]
    vehicles = h.vehicle.getIDList()
    persons = h.person.getIDList()
    waits = [env.crossing_waits(c) for c in geo["_cross_ids"]]
    return {
        **{k: v for k, v in geo.items() if not k.startswith("_")},
        "time_s": int(env.time_s),
        "clock": int(env.time_s),  # the replay aligns the two episodes by it (decision intervals differ)
        "halting": np.array([env.halting(lane) for lane in geo["lane_ids"]], dtype=np.int16),
        "light_signal": np.array(light_signal, dtype=np.int8),
        "crossing_signal": np.array(cross_signal, dtype=np.int8),
        "stage": np.array([env.displayed_stage(lay.tls) for lay in env.layouts], dtype=np.int16),
        "n_stages": np.array([lay.n_stages for lay in env.layouts], dtype=np.int16),
        "walk_only": bool(env.params.pedestrian_stage),
        "vehicle_xy": np.array([h.vehicle.getPosition(v) for v in vehicles], dtype=float).reshape(-1, 2),
        "vehicle_halting": np.array([h.vehicle.getSpeed(v) < 0.1 for v in vehicles], dtype=bool),
        "person_xy": np.array([h.person.getPosition(p) for p in persons], dtype=float).reshape(-1, 2),
        "waiting": np.array([n for n, _ in waits], dtype=np.int16),
        "longest_wait_s": np.array([w for _, w in waits], dtype=float),
    }


def _queue_line(shape: np.ndarray, metres: float) -> np.ndarray:
    """The last ``metres`` of a lane's polyline (from its stop line back), as a polyline."""
    seg = np.linalg.norm(np.diff(shape, axis=0), axis=1)
    back = np.concatenate([[0.0], np.cumsum(seg[::-1])])  # distance of each point from the end
    rev = shape[::-1]
    if metres >= back[-1]:
        return shape
    k = int(np.searchsorted(back, metres))
    f = (metres - back[k - 1]) / max(seg[::-1][k - 1], 1e-9)
    cut = rev[k - 1] + f * (rev[k] - rev[k - 1])
    return np.vstack([rev[:k], cut])[::-1]


def _stage_words(stage: int, n_stages: int, walk_only: bool) -> str:
    if stage < 0:
        return "changing"
    if walk_only and stage == n_stages - 1:
        return "walk-only"
    return f"stage {stage + 1}"


def draw(ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
    """The network with lights, queues to scale, vehicles, pedestrians and waiting counts."""
    from matplotlib.collections import PolyCollection
    from matplotlib.legend_handler import HandlerTuple
    from matplotlib.lines import Line2D

    snap = history[-1]
    ax.set_xticks([])
    ax.set_yticks([])
    if "lanes" not in snap:
        ax.set_title(title, fontsize=8)
        return
    ax.add_collection(PolyCollection(snap["walks"], facecolors="#ece6f2", edgecolors="none", zorder=1))
    ax.add_collection(PolyCollection(snap["junctions"], facecolors="#d4d4d4", edgecolors="none", zorder=1))
    ax.add_collection(
        PolyCollection(
            snap["lane_surfaces"], facecolors="#d4d4d4", edgecolors="white", linewidths=0.3, zorder=2
        )
    )
    halting = np.asarray(snap["halting"])
    queues = [
        _band(_queue_line(snap["lanes"][k], VEHICLE_SPACE_M * float(halting[k])), snap["lane_widths"][k])
        for k in np.flatnonzero(halting > 0)
    ]
    if queues:
        ax.add_collection(
            PolyCollection(queues, facecolors=QUEUE_COLOR, edgecolors="none", alpha=0.8, zorder=3)
        )
    if snap["crossings"]:
        colors = SIGNAL_COLORS[np.asarray(snap["crossing_signal"], dtype=int)]
        ax.add_collection(
            PolyCollection(snap["crossings"], facecolors=colors, alpha=0.55, edgecolors="none", zorder=3)
        )
    if snap["lights"]:
        colors = SIGNAL_COLORS[np.asarray(snap["light_signal"], dtype=int)]
        ax.add_collection(PolyCollection(snap["lights"], facecolors=colors, edgecolors="none", zorder=4))
    veh = np.asarray(snap["vehicle_xy"])
    if len(veh):
        ax.scatter(veh[:, 0], veh[:, 1], s=5, color=VEHICLE_COLOR, linewidths=0, zorder=5)
    ped = np.asarray(snap["person_xy"])
    if len(ped):
        ax.scatter(ped[:, 0], ped[:, 1], s=4, color=PERSON_COLOR, linewidths=0, zorder=5)
    waiting = np.asarray(snap["waiting"])
    for shape, n in zip(snap["crossings"], waiting, strict=False):
        if n > 0:
            x, y = np.mean(shape, axis=0)
            ax.text(
                x,
                y,
                str(int(n)),
                fontsize=6,
                color="white",
                ha="center",
                va="center",
                zorder=6,
                bbox={"boxstyle": "circle,pad=0.25", "facecolor": WAIT_COLOR, "edgecolor": "none"},
            )
    stages = np.asarray(snap["stage"])
    n_stages = np.asarray(snap["n_stages"])
    x0, y0, x1, y1 = snap["extent"]
    span = max(x1 - x0, y1 - y0, 1.0)
    words = [
        _stage_words(int(k), int(n), bool(snap["walk_only"])) for k, n in zip(stages, n_stages, strict=True)
    ]
    for (x, y), said in zip(snap["junction_xy"], words, strict=True):
        if len(words) == 1:
            break  # one junction: its stage is said in the title
        ax.text(
            x + 0.07 * span,
            y + 0.07 * span,
            said,
            fontsize=6,
            zorder=7,
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "#999999", "alpha": 0.85},
        )
    pad = 0.03 * span
    ax.set_xlim(x0 - pad, x1 + pad)
    ax.set_ylim(y0 - pad, y1 + pad)
    ax.set_aspect("equal")
    t = int(snap["time_s"])
    moving = int(len(veh) - np.sum(snap["vehicle_halting"]))
    second = [f"signal: {words[0]}"] if len(words) == 1 else []
    if snap["crossings"]:
        longest = float(np.max(snap["longest_wait_s"], initial=0.0))
        second.append(f"waiting to cross {int(waiting.sum())} (longest {longest:.0f} s)")
    line = f"time {t // 60}:{t % 60:02d} · vehicles halting {int(halting.sum())} · moving {moving}"
    if second:
        line += "\n" + " · ".join(second)
    ax.set_title(f"{title}\n{line}", fontsize=8)
    lights = tuple(
        Line2D([], [], marker="s", color=SIGNAL_COLORS[k], linestyle="", ms=5) for k in (GREEN, YELLOW, RED)
    )
    handles = [
        lights,
        Line2D([], [], marker="s", color=QUEUE_COLOR, linestyle="", ms=5),
        Line2D([], [], marker="o", color=VEHICLE_COLOR, linestyle="", ms=3),
    ]
    if snap["crossings"]:
        handles += [
            Line2D([], [], marker="o", color=PERSON_COLOR, linestyle="", ms=3),
            Line2D([], [], marker="o", color=WAIT_COLOR, linestyle="", ms=7),
        ]
    labels = ["light: green, yellow, red", "queue (to scale)", "vehicle", "pedestrian", "waiting to cross"]
    legend_below(
        ax,
        handles,
        3,
        labels=labels[: len(handles)],
        handler_map={tuple: HandlerTuple(ndivide=None, pad=0.1)},
    )


def divergence(a: dict[str, Any], b: dict[str, Any]) -> float:
    """People held up differently: the gap in halting vehicles plus the gap in pedestrians waiting to
    cross (each person counts once, as the person-delay KPI counts them)."""
    if "halting" not in a or "halting" not in b:
        return abs(float(a.get("return", 0.0)) - float(b.get("return", 0.0)))
    vehicles = abs(int(np.sum(a["halting"])) - int(np.sum(b["halting"])))
    people = abs(int(np.sum(a["waiting"])) - int(np.sum(b["waiting"])))
    return float(vehicles + people)
