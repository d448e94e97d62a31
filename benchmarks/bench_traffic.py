"""SUMO speed through libsumo vs TraCI, and fieldrl's env overhead over bare SUMO stepping.

Run: ``python benchmarks/bench_traffic.py [--quick]``. Writes ``benchmarks/results/traffic.json``.
Same scenario, same run, same seeds: the single intersection of ``traffic/quick`` (30 simulated
minutes with vehicles and pedestrians, SUMO's fixed-time program so every variant runs the same
signals).

* bare SUMO: ``simulationStep()`` in a loop, in-process (libsumo) and over a TraCI socket;
* fieldrl env: ``TrafficEnv.step`` (5 s per decision) with per-second pedestrian bookkeeping,
  observations, rewards and KPIs, under libsumo; once on SUMO's program and once under fieldrl's
  own stage controller (actions from a fixed cycle).
"""

from __future__ import annotations

import datetime as dt
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
from _common import machine_info, quick_mode, write_result

from fieldrl.domains.traffic import sumo
from fieldrl.domains.traffic.env import TrafficEnv
from fieldrl.domains.traffic.params import TrafficParams

RESULT = Path(__file__).parent / "results" / "traffic.json"


def bare(params: TrafficParams, seed: int, use_traci: bool) -> tuple[float, int]:
    """Seconds and simulation steps for one episode of plain ``simulationStep`` calls."""
    env = TrafficEnv(params)  # only for its SUMO command line (network, demand, programs)
    cmd = env._command(seed)
    owner = object()
    handle = sumo.start(cmd, owner, use_traci)
    t0 = time.perf_counter()
    for _ in range(params.duration_s):
        handle.simulationStep()
    elapsed = time.perf_counter() - t0
    sumo.close(handle, owner)
    return elapsed, params.duration_s


def through_env(params: TrafficParams, seed: int, native: str | None) -> tuple[float, int]:
    env = TrafficEnv(params, native_program=native)
    env.reset(seed=seed)
    t0 = time.perf_counter()
    n = 0
    agent = env.possible_agents[0]
    while env.agents:
        mask = env.action_mask(agent)
        want = (n // 6) % 2
        env.step({agent: want if mask[want] else int(np.flatnonzero(mask)[0])})
        env.episode_info()
        n += 1
    elapsed = time.perf_counter() - t0
    env.close()
    return elapsed, env.time_s


def main() -> None:
    params = TrafficParams()
    seeds = [1000, 1001] if quick_mode() else [1000, 1001, 1002, 1003, 1004]
    runs = {
        "libsumo_bare": lambda s: bare(params, s, use_traci=False),
        "traci_bare": lambda s: bare(params, s, use_traci=True),
        "libsumo_env_sumo_program": lambda s: through_env(params, s, "0"),
        "libsumo_env_fieldrl_control": lambda s: through_env(params, s, None),
    }
    rows: dict[str, dict[str, float]] = {}
    for name, fn in runs.items():
        fn(seeds[0])  # warm-up (imports, network and demand files)
        times, steps = [], 0
        for s in seeds:
            elapsed, n = fn(s)
            times.append(elapsed)
            steps += n
        total = float(np.sum(times))
        rows[name] = {
            "sim_seconds": steps,
            "wall_seconds": total,
            "sim_steps_per_s": steps / total,
            "episode_wall_s_median": float(np.median(times)),
        }
        print(f"{name:32s} {steps / total:9.0f} sim-steps/s   {np.median(times):6.2f} s per 30-min episode")
    ratio = rows["libsumo_bare"]["sim_steps_per_s"] / rows["traci_bare"]["sim_steps_per_s"]
    overhead = rows["libsumo_env_sumo_program"]["wall_seconds"] / rows["libsumo_bare"]["wall_seconds"]
    print(f"libsumo / TraCI: {ratio:.1f}x; env / bare libsumo: {overhead:.2f}x wall time")
    write_result(
        RESULT,
        {
            "benchmark": "traffic",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": machine_info(eclipse_sumo=version("eclipse-sumo"), libsumo=version("libsumo")),
            "scenario": "traffic/quick single intersection, 1800 s, SUMO step 1 s",
            "seeds": seeds,
            "results": rows,
            "libsumo_over_traci_speedup": ratio,
            "env_over_bare_wall_time": overhead,
            "env_fieldrl_control_over_bare_wall_time": rows["libsumo_env_fieldrl_control"]["wall_seconds"]
            / rows["libsumo_bare"]["wall_seconds"],
        },
    )


if __name__ == "__main__":
    main()
