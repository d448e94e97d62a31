"""Replay frames of a taxiway episode (``fieldrl replay``): the airport surface (runways, taxiways,
stands), every taxiing aircraft where it is and where it heads, its destination, aircraft in conflict
now ringed, the conflicts so far marked where they happened, and runways in use.

A snapshot is plain data. The surface's lines are computed once per airport and the same arrays are
put in every snapshot of it, so a long episode holds the geometry once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fieldrl.reportkit.figures import legend_below
from fieldrl.simulators.airport.engine import CONFLICT_KINDS

if TYPE_CHECKING:
    from fieldrl.domains.multiagent import ParallelLockstepEnvs
    from fieldrl.domains.taxiway.env import TaxiwayEnv
    from fieldrl.simulators.airport.layout import Surface

#: conflict kind -> (marker, colour, words), as the report's airport map
KIND_STYLE = {
    "separation": ("o", "#d62728", "separation"),
    "head_on": ("X", "#9467bd", "head-on"),
    "runway": ("^", "#ff7f0e", "runway incursion"),
}
DEPARTURE_COLOR, ARRIVAL_COLOR = "#1f77b4", "#2ca02c"
#: a conflict this many steps old or newer is drawn large (older ones stay, small and faded)
RECENT_STEPS = 6
#: steps of each aircraft's recent path drawn behind it
TRAIL = 6
_SURFACES: dict[int, tuple[Surface, dict[str, Any]]] = {}


def _static(surface: Surface) -> dict[str, Any]:
    """Taxiway segments, runway lines, stands and the map's extent (metres), once per surface.

    The surface is kept alive beside its geometry so that its ``id`` is never reused for another one.
    """
    key = id(surface)
    if key not in _SURFACES:
        layout = surface.layout
        xy = {n.id: (n.x, n.y) for n in layout.nodes}
        taxiways = np.array([(xy[e.u], xy[e.v]) for e in layout.edges], dtype=float).reshape(-1, 2, 2)
        runways = np.array([r["ends"] for r in layout.runways if r.get("ends")], dtype=float).reshape(
            -1, 2, 2
        )
        every = np.concatenate([taxiways.reshape(-1, 2), runways.reshape(-1, 2)])
        _SURFACES[key] = (
            surface,
            {
                "taxiways": taxiways,
                "runways": runways,
                "runway_names": [str(r["id"]) for r in layout.runways if r.get("ends")],
                "stands": np.array([(n.x, n.y) for n in layout.nodes if n.kind == "stand"]).reshape(-1, 2),
                "extent": np.r_[every.min(axis=0), every.max(axis=0)],
            },
        )
    return _SURFACES[key][1]


def snapshot(envs: ParallelLockstepEnvs, index: int) -> dict[str, Any]:
    """Episode ``index`` now: taxiing aircraft (place, heading, kind, goal, in conflict), conflicts so
    far, runways in use, counts."""
    env: TaxiwayEnv = envs.envs[index]
    sim, s = env.sim, env.surface
    active = list(sim.active)
    conflicted = {k for i, j, _ in sim.conflicts() for k in (i, j) if k >= 0}
    moves = [sim.movements[i] for i in active]
    events = np.array([(t, x, y, CONFLICT_KINDS.index(kind)) for t, kind, x, y in sim.events], dtype=float)
    static = _static(s)
    in_use = [
        sim.runway_active(r, sim.t) for r, rid in enumerate(s.runway_ids) if rid in static["runway_names"]
    ]
    return {
        **static,
        "ids": np.array(active, dtype=np.int32),
        "xy": s.cell_xy[[sim.cell(i) for i in active]].reshape(-1, 2),
        "heading": np.array([m.heading for m in moves], dtype=float),
        "departure": np.array([m.departure for m in moves], dtype=bool),
        "goal_xy": s.cell_xy[[int(s.pos_cell[m.goal]) for m in moves]].reshape(-1, 2),
        "in_conflict": np.array([i in conflicted for i in active], dtype=bool),
        "held": np.array([m.wait_run > 0 for m in moves], dtype=bool),
        "events": events.reshape(-1, 4),
        "runway_in_use": np.array(in_use, dtype=bool),
        "t": int(sim.t),
        "minutes": sim.t * sim.cfg.dt_s / 60.0,
        "completed": int(sum(m.done_t >= 0 for m in sim.movements)),
        "waiting": int(len(sim.pending)),
        "movements": int(len(sim.movements)),
        "conflicts": int(len(sim.events)),
    }


def draw(ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
    """The surface with the aircraft now (arrows: heading; dotted: to the destination), trails behind
    them, conflicts marked where they happened (large when recent), runways in use in red."""
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    snap = history[-1]
    ax.set_xticks([])
    ax.set_yticks([])
    if "taxiways" not in snap:
        ax.set_title(title, fontsize=8)
        return
    in_use = np.asarray(snap["runway_in_use"], dtype=bool)
    runways = snap["runways"]
    if len(runways):
        ax.add_collection(
            LineCollection(runways, colors=np.where(in_use, "#c44e52", "#555555"), linewidths=6, zorder=1)
        )
        for (x0, y0), name in zip(runways[:, 0], snap["runway_names"], strict=True):
            ax.text(x0, y0 - 40, name, fontsize=6, color="#333333", va="top", zorder=1)
    ax.add_collection(LineCollection(snap["taxiways"], colors="#c8c8c8", linewidths=1.2, zorder=2))
    stands = snap["stands"]
    ax.scatter(stands[:, 0], stands[:, 1], s=8, marker="s", color="#999999", zorder=3)
    xy, ids = np.asarray(snap["xy"]), np.asarray(snap["ids"])
    colors = np.where(np.asarray(snap["departure"], dtype=bool), DEPARTURE_COLOR, ARRIVAL_COLOR)
    trails = _trails(history, ids)
    if trails:
        ax.add_collection(
            LineCollection(
                [trails[i] for i in range(len(ids)) if i in trails],
                colors=[colors[i] for i in range(len(ids)) if i in trails],
                linewidths=2.0,
                alpha=0.35,
                zorder=4,
            )
        )
    if len(ids):
        goals = np.asarray(snap["goal_xy"])
        ax.add_collection(
            LineCollection(
                np.stack([xy, goals], axis=1),
                colors=colors,
                linewidths=0.7,
                linestyles=":",
                alpha=0.8,
                zorder=4,
            )
        )
        ax.scatter(
            goals[:, 0],
            goals[:, 1],
            s=22,
            marker="D",
            facecolor="none",
            edgecolor=colors,
            linewidths=0.8,
            zorder=4,
        )
        heading = np.asarray(snap["heading"])
        ax.quiver(
            xy[:, 0],
            xy[:, 1],
            np.cos(heading),
            np.sin(heading),
            color=colors,
            angles="xy",
            pivot="middle",
            scale=40,
            width=0.010,
            headwidth=3,
            headlength=3,
            headaxislength=2.7,
            zorder=6,
        )
        hit = np.asarray(snap["in_conflict"], dtype=bool)
        if hit.any():
            ax.scatter(
                xy[hit, 0], xy[hit, 1], s=170, facecolor="none", edgecolor="#d62728", linewidths=1.5, zorder=7
            )
    events = np.asarray(snap["events"])
    for k, kind in enumerate(CONFLICT_KINDS):
        ev = events[events[:, 3] == k] if len(events) else events
        if not len(ev):
            continue
        marker, color, _ = KIND_STYLE[kind]
        recent = ev[:, 0] >= snap["t"] - RECENT_STEPS
        ax.scatter(ev[~recent, 1], ev[~recent, 2], marker=marker, s=14, color=color, alpha=0.45, zorder=5)
        ax.scatter(
            ev[recent, 1],
            ev[recent, 2],
            marker=marker,
            s=60,
            color=color,
            edgecolor="black",
            linewidths=0.5,
            zorder=8,
        )
    x0, y0, x1, y1 = snap["extent"]
    pad = 0.04 * max(x1 - x0, y1 - y0, 1.0)
    ax.set_xlim(x0 - pad, x1 + pad)
    ax.set_ylim(y0 - pad, y1 + pad)
    ax.set_aspect("equal")
    minutes = snap["minutes"]
    line = (
        f"time {int(minutes)}:{int(round(60 * (minutes % 1))):02d} · taxiing {len(ids)}"
        f" · done {snap['completed']}/{snap['movements']} · to come {snap['waiting']}"
        f"\nconflicts so far {snap['conflicts']} · in conflict now {int(np.sum(snap['in_conflict']))}"
    )
    ax.set_title(f"{title}\n{line}", fontsize=8)
    handles = [
        Line2D([], [], marker=">", color=DEPARTURE_COLOR, linestyle="", ms=6, label="departure"),
        Line2D([], [], marker=">", color=ARRIVAL_COLOR, linestyle="", ms=6, label="arrival"),
        Line2D(
            [],
            [],
            marker="D",
            markerfacecolor="none",
            color="#555555",
            linestyle="",
            ms=4,
            label="destination",
        ),
        Line2D(
            [],
            [],
            marker="o",
            markerfacecolor="none",
            color="#d62728",
            linestyle="",
            ms=8,
            label="in conflict",
        ),
        Line2D([], [], color="#c44e52", linewidth=4, solid_capstyle="butt", label="runway in use"),
    ]
    handles += [
        Line2D([], [], marker=m, color=c, linestyle="", ms=5, label=words)
        for m, c, words in KIND_STYLE.values()
    ]
    legend_below(ax, handles, 4)


def _trails(history: Sequence[dict[str, Any]], ids: np.ndarray) -> dict[int, np.ndarray]:
    """Position in ``ids`` -> the aircraft's places over the last :data:`TRAIL` snapshots (2+ places)."""
    where: dict[int, list[np.ndarray]] = {int(a): [] for a in ids}
    for snap in history[-TRAIL:]:
        for a, p in zip(
            np.asarray(snap.get("ids", ())).tolist(), np.asarray(snap.get("xy", ())), strict=True
        ):
            if a in where:
                where[a].append(p)
    out = {}
    for k, a in enumerate(ids.tolist()):
        if len(where[a]) > 1:
            out[k] = np.array(where[a])
    return out


def divergence(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Conflicts-so-far gap (twice), completed-movements gap, and half the aircraft that are taxiing in
    one episode only or stand in different places in the two (the traffic is the same in both)."""
    if "ids" not in a or "ids" not in b:
        return abs(float(a.get("return", 0.0)) - float(b.get("return", 0.0)))
    pa = dict(zip(np.asarray(a["ids"]).tolist(), np.asarray(a["xy"]), strict=True))
    pb = dict(zip(np.asarray(b["ids"]).tolist(), np.asarray(b["xy"]), strict=True))
    apart = len(pa.keys() ^ pb.keys())
    apart += sum(1 for i in pa.keys() & pb.keys() if math.dist(pa[i], pb[i]) > 1.0)
    return float(
        2 * abs(a["conflicts"] - b["conflicts"]) + abs(a["completed"] - b["completed"]) + 0.5 * apart
    )
