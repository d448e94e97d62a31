"""Per-slot time of each stage of the UAV offloading pipeline against UAV and vehicle counts.

Run: ``python benchmarks/bench_uav.py`` (``--quick`` for a smaller version). Writes
``benchmarks/results/uav.json`` and prints a table. Each configuration runs full-pipeline episodes
with a fixed mid-level action for every agent (the allocation the agents pick does not change the
solver sizes much) and records, per slot, the wall time of every SOCP solve (cvxpy + CLARABEL, per
UAV), the LP solves (scipy ``linprog`` HiGHS, all alternations of the slot), the rectifier, and the
whole env step; medians and 90th percentiles are reported. The issue's targets (4 UAVs, 40 vehicles):
SOCP <= 50 ms per UAV per slot, LP <= 20 ms per slot.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import cvxpy
import numpy as np
import scipy
from _common import machine_info, quick_mode, write_result

from fieldrl.domains.uav.env import UavParallelEnv
from fieldrl.simulators.uav.params import UavParams

RESULT = Path(__file__).parent / "results" / "uav.json"
CONFIGS = [(2, 10), (4, 20), (4, 40), (6, 60), (8, 80), (8, 160)]
QUICK_CONFIGS = [(2, 10), (4, 40)]


def measure(n_uavs: int, n_vehicles: int, slots: int, episodes: int) -> dict:
    params = UavParams(
        n_uavs=n_uavs,
        n_vehicles=n_vehicles,
        load=2.0,
        episode_slots=slots,
        road_spacing_m=200.0,
        d_min_m=50.0,
    )
    env = UavParallelEnv(params)
    action = (len(params.admit_levels) // 2) * 2 + 1  # mid admission level, demand-proportional shares
    socp, socp_slot, lp, rect, step = [], [], [], [], []
    for episode in range(episodes):
        env.reset(seed=episode)
        while env.agents:
            n_socp = len(env.socp_ms)
            n_lp = len(env.lp_ms)
            start = time.perf_counter()
            env.step({a: action for a in env.agents})
            step.append((time.perf_counter() - start) * 1e3)
            new_socp = env.socp_ms[n_socp:]
            socp.extend(new_socp)
            socp_slot.append(sum(new_socp))
            lp.extend(env.lp_ms[n_lp:])
            rect.extend(env.rect_ms[n_lp:])

    def stats(values: list[float]) -> dict[str, float]:
        arr = np.asarray(values, float)
        return {"median": float(np.median(arr)), "p90": float(np.percentile(arr, 90)), "n": int(arr.size)}

    return {
        "n_uavs": n_uavs,
        "n_vehicles": n_vehicles,
        "socp_ms_per_uav": stats(socp),
        "socp_ms_per_slot": stats(socp_slot),
        "lp_ms_per_slot": stats(lp),
        "rectifier_ms_per_slot": stats(rect),
        "env_step_ms": stats(step),
        "success_rate": env.episode_info()["success_rate"],
    }


def main() -> dict:
    quick = quick_mode()
    configs = QUICK_CONFIGS if quick else CONFIGS
    slots, episodes = (10, 1) if quick else (30, 3)
    rows = [measure(m, n, slots, episodes) for m, n in configs]
    target = next((r for r in rows if r["n_uavs"] == 4 and r["n_vehicles"] == 40), None)
    result = {
        "benchmark": "UAV offloading pipeline stage times per slot (fieldrl.domains.uav)",
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(numpy=np.__version__, scipy=scipy.__version__, cvxpy=cvxpy.__version__),
        "quick": quick,
        "slots_per_episode": slots,
        "episodes": episodes,
        "configs": rows,
        "targets_4_uavs_40_vehicles": None
        if target is None
        else {
            "socp_ms_per_uav_median": target["socp_ms_per_uav"]["median"],
            "socp_target_ms": 50.0,
            "lp_ms_per_slot_median": target["lp_ms_per_slot"]["median"],
            "lp_target_ms": 20.0,
        },
    }
    if target is not None:
        result["headline"] = [
            {
                "label": "UAV SOCP waypoint solve per UAV per slot, 4 UAVs / 40 vehicles (median)",
                "value": target["socp_ms_per_uav"]["median"],
                "unit": "ms",
                "target": "<= 50 ms",
            },
            {
                "label": "UAV offloading LP per slot incl. alternations, 4 UAVs / 40 vehicles (median)",
                "value": target["lp_ms_per_slot"]["median"],
                "unit": "ms",
                "target": "<= 20 ms",
            },
        ]
    labels = [f"{r['n_uavs']}/{r['n_vehicles']}" for r in rows]
    xs = [r["n_vehicles"] for r in rows]
    result["curves"] = [
        {
            "title": "pipeline stage time per slot vs vehicles (UAVs/vehicles: " + ", ".join(labels) + ")",
            "xlabel": "vehicles",
            "ylabel": "median ms per slot",
            "log": True,
            "series": {
                name: {"x": xs, "y": [r[key]["median"] for r in rows]}
                for name, key in [
                    ("SOCP (all UAVs)", "socp_ms_per_slot"),
                    ("LP", "lp_ms_per_slot"),
                    ("rectifier", "rectifier_ms_per_slot"),
                    ("whole env step", "env_step_ms"),
                ]
            },
        }
    ]
    write_result(RESULT, result)
    header = (
        f"{'UAVs':>4} {'veh':>4} {'SOCP/UAV':>9} {'SOCP/slot':>10} {'LP/slot':>8} {'rect':>7} {'step':>7}"
    )
    print(header + "   (median ms; p90 in brackets)")
    for r in rows:
        print(
            f"{r['n_uavs']:>4} {r['n_vehicles']:>4} {r['socp_ms_per_uav']['median']:>9.2f} "
            f"{r['socp_ms_per_slot']['median']:>10.2f} {r['lp_ms_per_slot']['median']:>8.2f} "
            f"{r['rectifier_ms_per_slot']['median']:>7.2f} {r['env_step_ms']['median']:>7.1f}"
            f"   [{r['socp_ms_per_uav']['p90']:.2f}, {r['lp_ms_per_slot']['p90']:.2f}]"
        )
    return result


if __name__ == "__main__":
    main()
