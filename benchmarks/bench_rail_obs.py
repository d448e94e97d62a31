"""Rail observation speed: fieldrl's fast builder vs Flatland's TreeObsForRailEnv, same states, same run.

Run: ``python benchmarks/bench_rail_obs.py``. Writes ``benchmarks/results/rail_obs.json``.
On level 4 (80 trains, 35x30) trains are driven by the shortest-path rule; at sampled steps both
builders observe every train of the same Flatland state: Flatland's ``TreeObsForRailEnv(max_depth=3,
ShortestPathPredictorForRailEnv(50))`` (Flatland's default, as in ``env_generator``) via ``get_many``,
and :meth:`RailParallelEnv.observe_all`. Also level 0 (7 trains). Times are per call (all trains).
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import flatland
import numpy as np
from _common import machine_info, quick_mode, write_result
from flatland.envs.observations import TreeObsForRailEnv
from flatland.envs.predictions import ShortestPathPredictorForRailEnv

from fieldrl.domains.rail.env import LEFT, RailParallelEnv

RESULT = Path(__file__).parent / "results" / "rail_obs.json"


def shortest_actions(env: RailParallelEnv) -> dict[str, int]:
    out = {}
    for agent in env.agents:
        i, mask = env.index[agent], env.action_mask(agent)
        if mask[1]:
            out[agent] = 1
        elif mask[4:7].any():
            out[agent] = LEFT + int(np.argmin(env.option_distances(i)))
        else:
            out[agent] = 0
    return out


def measure(level: int, seeds: list[int], samples: int) -> dict:
    fast, tree = [], []
    for seed in seeds:
        env = RailParallelEnv(level=level, mode="semi")
        env.reset(seed=seed)
        builder = TreeObsForRailEnv(max_depth=3, predictor=ShortestPathPredictorForRailEnv(max_depth=50))
        builder.reset(env.fl)
        taken = 0
        while env.agents and taken < samples:
            handles = list(range(env.n))
            start = time.perf_counter()
            builder.get_many(handles)
            tree.append(time.perf_counter() - start)
            start = time.perf_counter()
            env.observe_all()
            fast.append(time.perf_counter() - start)
            taken += 1
            env.step(shortest_actions(env))
    fast_ms, tree_ms = 1e3 * np.median(fast), 1e3 * np.median(tree)
    return {
        "level": level,
        "trains": env.n,
        "calls": len(fast),
        "fieldrl_ms_per_call_median": round(float(fast_ms), 3),
        "tree_obs_ms_per_call_median": round(float(tree_ms), 3),
        "fieldrl_ms_per_call_mean": round(float(1e3 * np.mean(fast)), 3),
        "tree_obs_ms_per_call_mean": round(float(1e3 * np.mean(tree)), 3),
        "speedup_median": round(float(tree_ms / fast_ms), 1),
        "speedup_mean": round(float(np.mean(tree) / np.mean(fast)), 1),
    }


def main() -> dict:
    quick = quick_mode()
    samples = 10 if quick else 60
    seeds = [0] if quick else [0, 1, 2]
    rows = [measure(4, seeds, samples), measure(0, seeds, samples)]
    result = {
        "benchmark": "rail_obs",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "target": "fieldrl builder >= 10x faster than TreeObsForRailEnv on the 80-train level",
        "machine": machine_info(flatland=flatland.__version__ if hasattr(flatland, "__version__") else "4.x"),
        "levels": rows,
        "headline": [
            {
                "label": "rail obs, 80 trains: fieldrl builder vs TreeObsForRailEnv (same run, median)",
                "value": rows[0]["speedup_median"],
                "unit": "x",
                "target": ">= 10x",
            }
        ],
    }
    write_result(RESULT, result)
    for r in rows:
        print(
            f"level {r['level']} ({r['trains']} trains, {r['calls']} calls): "
            f"fieldrl {r['fieldrl_ms_per_call_median']} ms, TreeObs {r['tree_obs_ms_per_call_median']} ms "
            f"-> {r['speedup_median']}x (median)"
        )
    return result


if __name__ == "__main__":
    main()
