"""Replay frames of a rail episode (``fieldrl replay``): the track, the stations, every train where it
stands and which way it heads, breakdowns highlighted, and how many trains have arrived, are still
waiting to depart, broke down or are deadlocked.

A snapshot is plain data. The track (line segments through every rail cell) is computed once per
network and the same arrays are put in every snapshot of that network, so a long episode holds the
geometry once; drawing builds one collection from them per frame.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fieldrl.reportkit.figures import legend_below

if TYPE_CHECKING:
    from fieldrl.domains.multiagent import ParallelLockstepEnvs
    from fieldrl.domains.rail.env import RailParallelEnv

#: train status codes in snapshots
WAITING, MOVING, STOPPED, BROKEN, DEADLOCKED, ARRIVED, CANCELLED = range(7)
#: status -> (colour, words); trains off the map (waiting, arrived, cancelled) are counted, not drawn
STATUS_STYLE = {
    MOVING: ("#1f77b4", "running"),
    STOPPED: ("#ff7f0e", "stopped"),
    BROKEN: ("#d62728", "broken down"),
    DEADLOCKED: ("#111111", "deadlocked"),
}
#: Flatland steps of each train's recent path drawn behind it
TRAIL = 8
_DR = np.array([-1, 0, 1, 0])
_DC = np.array([0, 1, 0, -1])
_TRACKS: OrderedDict[tuple[Any, ...], dict[str, np.ndarray]] = OrderedDict()
_TRACK_CACHE_SIZE = 16


def _track(env: RailParallelEnv) -> dict[str, np.ndarray]:
    """Segments through every rail cell (entry side -> centre -> exit side), stations and the extent
    of the rails; cached by the grid's content (both policies of a case share one network)."""
    grid = np.ascontiguousarray(env.fl.rail.grid)
    key = (grid.shape, hashlib.sha1(grid.tobytes()).hexdigest())
    if key in _TRACKS:
        _TRACKS.move_to_end(key)
        return _TRACKS[key]
    trans = env.net.trans
    lines: set[tuple[int, int, int, int]] = set()
    rows, cols = np.nonzero(grid)
    for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
        for d_in, d_out in zip(*np.nonzero(trans[r, c]), strict=True):
            a, b = (int(d_in) + 2) % 4, int(d_out)  # entered from the side opposite its heading
            lines.add((r, c, min(a, b), max(a, b)))
    segs = np.zeros((len(lines), 3, 2))
    for k, (r, c, a, b) in enumerate(sorted(lines)):
        segs[k] = [
            (c + 0.5 * _DC[a], r + 0.5 * _DR[a]),
            (c, r),
            (c + 0.5 * _DC[b], r + 0.5 * _DR[b]),
        ]
    static = {
        "segments": segs,
        "extent": np.array([rows.min(), rows.max(), cols.min(), cols.max()]) if len(rows) else np.zeros(4),
    }
    _TRACKS[key] = static
    if len(_TRACKS) > _TRACK_CACHE_SIZE:
        _TRACKS.popitem(last=False)
    return static


def _status(env: RailParallelEnv, i: int) -> int:
    from flatland.envs.step_utils.states import TrainState

    state = env.fl.agents[i].state
    if state == TrainState.DONE:
        return ARRIVED
    if env.cancelled[i]:
        return CANCELLED
    if i in env.stuck:
        return DEADLOCKED
    if state in (TrainState.MALFUNCTION, TrainState.MALFUNCTION_OFF_MAP):
        return BROKEN
    if state == TrainState.MOVING:
        return MOVING
    if state == TrainState.STOPPED:
        return STOPPED
    return WAITING


def snapshot(envs: ParallelLockstepEnvs, index: int) -> dict[str, Any]:
    """Episode ``index`` now: trains' cells, headings, status and recent paths; counts; the track."""
    env: RailParallelEnv = envs.envs[index]
    if env.fl is None:
        return {}
    n = env.n
    pos = np.full((n, 2), -1, dtype=np.int16)
    heading = np.zeros(n, dtype=np.int8)
    for i in range(n):
        conf = env.config(i)
        if conf is not None:
            pos[i], heading[i] = conf[:2], conf[2]
    status = np.array([_status(env, i) for i in range(n)], dtype=np.int8)
    agents = env.fl.agents
    return {
        **_track(env),
        "pos": pos,
        "heading": heading,
        "status": status,
        "origins": np.array([a.initial_configuration[0] for a in agents], dtype=np.int16).reshape(n, 2),
        "targets": np.array([next(iter(a.targets))[0] for a in agents], dtype=np.int16).reshape(n, 2),
        "trail": env.position_history()[-TRAIL:],
        "time": int(env.fl._elapsed_steps),
        "clock": int(env.fl._elapsed_steps),  # the replay aligns the two episodes by it
        "max_time": int(env.max_steps),
    }


def counts(snap: dict[str, Any]) -> dict[str, int]:
    """Trains by status, in words (a train that breaks down before it departs counts as not departed)."""
    status = np.asarray(snap.get("status", ()))
    on_map = np.asarray(snap["pos"])[:, 0] >= 0 if len(status) else np.zeros(0, bool)
    return {
        "arrived": int((status == ARRIVED).sum()),
        "running": int(np.isin(status, (MOVING, STOPPED)).sum()),
        "not departed": int(((status == WAITING) | ((status == BROKEN) & ~on_map)).sum()),
        "broken down": int(((status == BROKEN) & on_map).sum()),
        "deadlocked": int((status == DEADLOCKED).sum()),
        "cancelled": int((status == CANCELLED).sum()),
    }


def draw(ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
    """The network with every train on it now (arrows: where it heads; trails: its last cells)."""
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    snap = history[-1]
    ax.set_xticks([])
    ax.set_yticks([])
    if "segments" not in snap:
        ax.set_title(title, fontsize=8)
        return
    r0, r1, c0, c1 = (int(v) for v in snap["extent"])
    ax.add_collection(LineCollection(snap["segments"], colors="#b0b0b0", linewidths=1.6, zorder=1))
    origins, targets, pos = snap["origins"], snap["targets"], snap["pos"]
    status, heading = snap["status"], snap["heading"]
    ax.scatter(
        origins[:, 1],
        origins[:, 0],
        marker="s",
        s=28,
        facecolor="none",
        edgecolor="#7f7f7f",
        linewidths=0.8,
        zorder=2,
    )
    travelling = ~np.isin(status, (ARRIVED, CANCELLED))
    ax.scatter(targets[travelling, 1], targets[travelling, 0], marker="*", s=45, color="black", zorder=2)
    trail = np.asarray(snap["trail"])
    on = pos[:, 0] >= 0
    colors = np.array([STATUS_STYLE.get(int(s), ("#1f77b4", ""))[0] for s in status])
    if len(trail) > 1:
        paths = []
        path_colors = []
        for i in np.flatnonzero(on):
            cells = trail[:, i, :]
            cells = cells[cells[:, 0] >= 0]
            if len(cells) > 1:
                paths.append(cells[:, ::-1].astype(float))
                path_colors.append(colors[i])
        if paths:
            ax.add_collection(LineCollection(paths, colors=path_colors, linewidths=2.2, alpha=0.35, zorder=3))
    if on.any():
        d = heading[on].astype(int)
        ax.quiver(
            pos[on, 1] - 0.35 * _DC[d],
            pos[on, 0] - 0.35 * _DR[d],
            _DC[d],
            _DR[d],
            color=colors[on],
            angles="xy",
            scale_units="xy",
            scale=1 / 0.7,
            width=0.012,
            headwidth=3.2,
            headlength=3,
            headaxislength=2.8,
            zorder=4,
        )
        broken = on & (status == BROKEN)
        if broken.any():
            ax.scatter(
                pos[broken, 1],
                pos[broken, 0],
                s=150,
                facecolor="none",
                edgecolor="#d62728",
                linewidths=1.6,
                zorder=5,
            )
    ax.set_xlim(c0 - 1.5, c1 + 1.5)
    ax.set_ylim(r1 + 1.5, r0 - 1.5)
    ax.set_aspect("equal")
    n = len(status)
    c = counts(snap)
    line = (
        f"time {snap['time']}/{snap['max_time']} · arrived {c['arrived']}/{n} · running {c['running']}"
        f"\nnot departed {c['not departed']} · broken down {c['broken down']} · deadlocked {c['deadlocked']}"
        + (f" · cancelled {c['cancelled']}" if c["cancelled"] else "")
    )
    ax.set_title(f"{title}\n{line}", fontsize=8)
    handles = [
        Line2D([], [], marker=">", color=color, linestyle="", ms=6, label=words)
        for color, words in STATUS_STYLE.values()
    ]
    handles += [
        Line2D(
            [], [], marker="s", markerfacecolor="none", color="#7f7f7f", linestyle="", ms=5, label="origin"
        ),
        Line2D([], [], marker="*", color="black", linestyle="", ms=7, label="destination"),
    ]
    legend_below(ax, handles, 3, handletextpad=0.2, columnspacing=0.8)


def divergence(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Trains whose status differs (arrived, running, broken down, deadlocked, ...) plus half of those
    standing on different cells."""
    if "status" not in a or "status" not in b or len(a["status"]) != len(b["status"]):
        return abs(float(a.get("return", 0.0)) - float(b.get("return", 0.0)))
    status_gap = int((np.asarray(a["status"]) != np.asarray(b["status"])).sum())
    cell_gap = int(np.any(np.asarray(a["pos"]) != np.asarray(b["pos"]), axis=1).sum())
    return float(status_gap + 0.5 * cell_gap)
