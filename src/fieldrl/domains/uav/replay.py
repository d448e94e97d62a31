"""Replay frames of a UAV offloading episode (``fieldrl replay``): the road grid, the base station, each
UAV's flight path so far, the vehicles, which vehicle sent its last task to which UAV or to the base
station, the tasks that missed their deadline in that slot, and the failed tasks so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fieldrl.reportkit.figures import legend_below

if TYPE_CHECKING:
    from fieldrl.domains.multiagent import ParallelLockstepEnvs
    from fieldrl.domains.uav.env import UavParallelEnv

BS_COLOR, FAILED_COLOR, VEHICLE_COLOR = "#111111", "#d62728", "#7f7f7f"
UAV_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
#: metres of UAV displacement that count as much as one failed task in :func:`divergence`
METRES_PER_TASK = 100.0


def snapshot(envs: ParallelLockstepEnvs, index: int) -> dict[str, Any]:
    """Episode ``index`` now: UAVs (x, y, altitude), vehicles, the last slot's links and missed deadlines,
    tasks and failures so far."""
    env: UavParallelEnv = envs.envs[index]
    world, p = env.world, env.params
    return {
        "area_m": float(p.area_m),
        "roads": world.roads.lines,  # the same array every slot
        "bs": world.bs[:2].copy(),
        "uav": world.uav.copy(),
        "vehicles": world.vehicles.copy(),
        "server": env.last_server.copy(),
        "sent": env.last_present.copy(),
        "met": env.last_success.copy(),
        "slot": int(env.slots),
        "slots": int(p.episode_slots),
        "tasks": int(env.tasks),
        "failed": int(env.tasks - env.successes),
    }


def draw(ax: Any, history: Sequence[dict[str, Any]], title: str) -> None:
    """Roads, base station, UAV paths, vehicles with their last task's link (coloured by the server that
    took it; red cross: the deadline was missed)."""
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    snap = history[-1]
    ax.set_xticks([])
    ax.set_yticks([])
    if "uav" not in snap:
        ax.set_title(title, fontsize=8)
        return
    area = snap["area_m"]
    roads = np.asarray(snap["roads"])
    grid = [((r, 0.0), (r, roads[-1])) for r in roads] + [((0.0, r), (roads[-1], r)) for r in roads]
    ax.add_collection(LineCollection(grid, colors="#e3e3e3", linewidths=2.0, zorder=1))
    uav, veh, bs = np.asarray(snap["uav"]), np.asarray(snap["vehicles"]), np.asarray(snap["bs"])
    m = len(uav)
    server_xy = np.vstack([uav[:, :2], bs[None, :]])
    server_colors = np.array([*(UAV_COLORS[u % len(UAV_COLORS)] for u in range(m)), BS_COLOR])
    sent, server, met = (np.asarray(snap[k]) for k in ("sent", "server", "met"))
    linked = sent & (server >= 0)
    if linked.any():
        ends = np.stack([veh[linked], server_xy[server[linked]]], axis=1)
        ax.add_collection(
            LineCollection(ends, colors=server_colors[server[linked]], linewidths=0.8, alpha=0.6, zorder=2)
        )
    path = np.stack([np.asarray(h["uav"])[:, :2] for h in history if "uav" in h])  # (snapshots, m, 2)
    if len(path) > 1:
        ax.add_collection(
            LineCollection(
                path.transpose(1, 0, 2), colors=server_colors[:m], linewidths=1.5, alpha=0.7, zorder=3
            )
        )
    ax.scatter(veh[:, 0], veh[:, 1], s=14, marker="s", color=VEHICLE_COLOR, zorder=4)
    failed = sent & ~met
    if failed.any():
        ax.scatter(
            veh[failed, 0], veh[failed, 1], s=40, marker="x", color=FAILED_COLOR, linewidths=1.5, zorder=5
        )
    ax.scatter([bs[0]], [bs[1]], s=110, marker="^", color=BS_COLOR, zorder=5)
    ax.scatter(uav[:, 0], uav[:, 1], s=90, marker="o", color=server_colors[:m], edgecolor="white", zorder=6)
    for u in range(m):
        ax.annotate(
            f"UAV {u + 1} · {uav[u, 2]:.0f} m",
            (uav[u, 0], uav[u, 1]),
            xytext=(5, 5),
            textcoords="offset points",
            fontsize=6,
            color=server_colors[u],
            bbox={"facecolor": "white", "alpha": 0.7, "edgecolor": "none", "pad": 0.5},
            zorder=7,
        )
    pad = 0.03 * area
    ax.set_xlim(-pad, area + pad)
    ax.set_ylim(-pad, area + pad)
    ax.set_aspect("equal")
    n_sent = int(sent.sum())
    to_uav = int((linked & (server < m)).sum())
    to_bs = int((linked & (server == m)).sum())
    share = 100.0 * snap["failed"] / max(snap["tasks"], 1)
    line = (
        f"slot {snap['slot']}/{snap['slots']} · tasks failed {snap['failed']} of {snap['tasks']}"
        f" ({share:.0f} %)"
        f"\nlast slot: {to_uav} to UAVs · {to_bs} to base · {int(failed.sum())} of {n_sent} missed"
    )
    ax.set_title(f"{title}\n{line}", fontsize=8)
    handles = [
        Line2D([], [], marker="o", color=UAV_COLORS[0], linestyle="-", ms=6, label="UAV and its path"),
        Line2D([], [], marker="^", color=BS_COLOR, linestyle="", ms=7, label="base station"),
        Line2D([], [], marker="s", color=VEHICLE_COLOR, linestyle="", ms=4, label="vehicle"),
        Line2D([], [], color="#777777", linewidth=0.8, label="task sent to"),
        Line2D([], [], marker="x", color=FAILED_COLOR, linestyle="", ms=5, label="deadline missed"),
    ]
    legend_below(ax, handles, 3, handletextpad=0.4, columnspacing=0.9, handlelength=1.6)


def divergence(a: dict[str, Any], b: dict[str, Any]) -> float:
    """The gap in failed tasks so far, plus the UAVs' mean distance apart (per 100 m, one task)."""
    if "uav" not in a or "uav" not in b or np.shape(a["uav"]) != np.shape(b["uav"]):
        return abs(float(a.get("return", 0.0)) - float(b.get("return", 0.0)))
    apart = np.linalg.norm(np.asarray(a["uav"])[:, :2] - np.asarray(b["uav"])[:, :2], axis=1).mean()
    return float(abs(a["failed"] - b["failed"]) + apart / METRES_PER_TASK)
