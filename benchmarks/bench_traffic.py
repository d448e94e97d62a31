"""SUMO speed through libsumo vs TraCI, and fieldrl's env overhead over bare SUMO stepping.

Run: ``python benchmarks/bench_traffic.py [--quick]``. Writes ``benchmarks/results/traffic.json``.
Same scenario, same run, same seeds: the single intersection of ``traffic/quick`` (30 simulated
minutes with vehicles and pedestrians, SUMO's fixed-time program so every variant runs the same
signals).

* bare SUMO: ``simulationStep()`` in a loop, in-process (libsumo) and over a TraCI socket;
* fieldrl env: ``TrafficEnv.step`` (5 s per decision) with per-second pedestrian bookkeeping,
  observations, rewards and KPIs, under libsumo; once on SUMO's program and once under fieldrl's
  own stage controller (actions from a fixed cycle); and the latter once more over TraCI.

Bare stepping compares only SUMO's step (simulation work dominates, so the gap is small); the
env comparison includes the per-second state queries (persons, lanes, vehicles) an RL env makes,
each of which is a socket round trip under TraCI and a function call under libsumo.
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
    over_traci = TrafficParams(traci=True)
    seeds = [1000, 1001] if quick_mode() else [1000, 1001, 1002, 1003, 1004]
    runs = {
        "libsumo_bare": lambda s: bare(params, s, use_traci=False),
        "traci_bare": lambda s: bare(params, s, use_traci=True),
        "libsumo_env_sumo_program": lambda s: through_env(params, s, "0"),
        "libsumo_env_fieldrl_control": lambda s: through_env(params, s, None),
        "traci_env_fieldrl_control": lambda s: through_env(over_traci, s, None),
    }
    rounds = 1 if quick_mode() else 3
    for fn in runs.values():
        fn(seeds[0])  # warm-up (imports, network and demand files)
    # interleaved, so a burst of load from other users of the machine hits every variant alike
    times: dict[str, dict[int, list[float]]] = {name: {s: [] for s in seeds} for name in runs}
    for _ in range(rounds):
        for s in seeds:
            for name, fn in runs.items():
                elapsed, n = fn(s)
                assert n == params.duration_s, (name, n)
                times[name][s].append(elapsed)
    rows: dict[str, dict[str, float]] = {}
    per_seed: dict[str, list[float]] = {}
    for name in runs:
        per_seed[name] = [float(np.median(times[name][s])) for s in seeds]
        median = float(np.median([t for ts in times[name].values() for t in ts]))
        rows[name] = {
            "episodes": rounds * len(seeds),
            "episode_wall_s_median": median,
            "sim_steps_per_s": params.duration_s / median,
        }
        print(
            f"{name:32s} {params.duration_s / median:9.0f} sim-steps/s   {median:6.2f} s per 30-min episode"
        )
    ratio = rows["libsumo_bare"]["sim_steps_per_s"] / rows["traci_bare"]["sim_steps_per_s"]
    overhead = (
        rows["libsumo_env_sumo_program"]["episode_wall_s_median"]
        / rows["libsumo_bare"]["episode_wall_s_median"]
    )
    control = (
        rows["libsumo_env_fieldrl_control"]["episode_wall_s_median"]
        / rows["libsumo_bare"]["episode_wall_s_median"]
    )
    env_ratio = (
        rows["libsumo_env_fieldrl_control"]["sim_steps_per_s"]
        / rows["traci_env_fieldrl_control"]["sim_steps_per_s"]
    )
    print(
        f"libsumo / TraCI: {ratio:.1f}x bare, {env_ratio:.1f}x through the env; "
        f"env / bare libsumo: {overhead:.2f}x"
    )
    write_result(
        RESULT,
        {
            "benchmark": "traffic",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": machine_info(eclipse_sumo=version("eclipse-sumo"), libsumo=version("libsumo")),
            "scenario": "traffic/quick single intersection, 1800 s, SUMO step 1 s",
            "seeds": seeds,
            "rounds": rounds,
            "statistic": "median wall time per 30-min episode over seeds x rounds (interleaved)",
            "results": rows,
            "libsumo_over_traci_speedup": ratio,
            "libsumo_over_traci_speedup_through_env": env_ratio,
            "env_over_bare_wall_time": overhead,
            "env_fieldrl_control_over_bare_wall_time": control,
            "headline": [
                {
                    "label": "SUMO, one intersection + pedestrians: sim-steps/s libsumo vs TraCI, same run",
                    "value": ratio,
                    "unit": "x",
                },
                {
                    "label": "TrafficEnv (per-second state queries): sim-steps/s libsumo vs TraCI, same run",
                    "value": env_ratio,
                    "unit": "x",
                    "target": "~40x (issue 6)",
                },
                {
                    "label": "TrafficEnv wall time vs bare libsumo stepping, SUMO fixed-time program",
                    "value": overhead,
                    "unit": "x",
                },
                {
                    "label": "TrafficEnv wall time vs bare libsumo stepping, fieldrl stage control",
                    "value": control,
                    "unit": "x",
                },
            ],
            "curves": [
                {
                    "title": "simulated seconds per wall second, 30-min episode",
                    "xlabel": f"held-out day (seeds {seeds[0]}-{seeds[-1]})",
                    "ylabel": "sim-steps/s",
                    "log": True,
                    "series": {
                        name: {
                            "x": list(range(1, len(seeds) + 1)),
                            "y": [params.duration_s / t for t in per_seed[name]],
                        }
                        for name in rows
                    },
                }
            ],
        },
    )


if __name__ == "__main__":
    main()
