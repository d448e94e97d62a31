"""Taxiway engine and controller speed.

Run: ``python benchmarks/bench_taxiway.py [--quick]``. Writes ``benchmarks/results/taxiway.json``.

1. Engine steps/s against the number of taxiing aircraft (10 to 100) on the large airport: the
   engine alone (moves, spawns, exact conflict detection) and the full PettingZoo step
   (plus every aircraft's foresight observation). Aircraft follow their shortest paths; traffic is
   generated far above capacity so that ``max_active`` aircraft taxi throughout.
2. Computation per decision of each controller on the large airport at each density (wall-clock
   time of the policy's ``act`` per aircraft per step, as the evaluation runner measures it), and
   prioritized planning's time per plan. The learned policy's latency is that of the MaskablePPO
   network used in the scenarios (weights do not change its cost; an untrained one is timed).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import sb3_contrib
import torch
from _common import machine_info, quick_mode, write_result

from fieldrl.domains.multiagent import AgentSlotVecEnv
from fieldrl.domains.taxiway.domain import TaxiwayLockstepEnvs, make_env
from fieldrl.domains.taxiway.env import TaxiwayEnv
from fieldrl.domains.taxiway.heuristics import CBS, FCFS, Prioritized, ShortestPath
from fieldrl.domains.taxiway.params import TaxiwayParams
from fieldrl.policies.learned import SB3Policy
from fieldrl.simulators.airport.planning import action_towards

RESULT = Path(__file__).parent / "results" / "taxiway.json"


def engine_rate(n_aircraft: int, steps: int, with_obs: bool) -> tuple[float, float]:
    """(steps/s, mean aircraft taxiing) with ``n_aircraft`` allowed at once."""
    params = TaxiwayParams(layout="large", max_slots=n_aircraft, horizon_min=120.0)
    env = TaxiwayEnv(params)
    # far above capacity (Little's law: n aircraft x ~3 min taxi), beyond what scenarios may ask for
    env.sim.cfg = replace(env.sim.cfg, movements_per_hour=30.0 * n_aircraft, max_movements=100 * n_aircraft)
    env.reset(seed=0)
    sim, s = env.sim, env.surface

    def shortest() -> dict[int, int]:
        out = {}
        for i in sim.active:
            m = sim.movements[i]
            out[i] = action_towards(s, m.pos, int(s.next_to(m.goal)[m.pos]), m.goal)
        return out

    for _ in range(150):  # fill the airport
        sim.step(shortest())
    counts, elapsed = [], 0.0
    for _ in range(steps):
        acts = shortest()
        start = time.perf_counter()
        if with_obs:
            env.step({f"ac{i}": a for i, a in acts.items()})
        else:
            sim.step(acts)
        elapsed += time.perf_counter() - start
        counts.append(len(sim.active))
    return steps / elapsed, float(np.mean(counts))


def decision_latency(policy, params: TaxiwayParams, seeds: list[int]) -> dict[str, float]:
    envs = TaxiwayLockstepEnvs([TaxiwayEnv(params) for _ in seeds], seeds, [])
    obs = envs.reset()
    policy.reset(envs.n)
    bind = getattr(policy, "bind_envs", None)
    if bind:
        bind(envs)
    done = np.zeros(envs.n, dtype=bool)
    while not done.all():
        obs, _, term, trunc, _ = envs.step(policy.act(obs, np.zeros(envs.n, dtype=bool)))
        done |= term | trunc
    infos = [e.episode_info() for e in envs.envs]
    return {
        "decision_ms": float(infos[0]["decision_ms"]),
        "plan_ms": float(np.mean([i["plan_ms"] for i in infos])),
        "conflicts_per_100": float(np.mean([i["conflicts_per_100"] for i in infos])),
        "completed_pct": float(np.mean([i["completed_pct"] for i in infos])),
    }


DENSITIES = ("low", "medium", "high")


def main() -> None:
    torch.set_num_threads(1)
    quick = quick_mode()
    steps = 100 if quick else 400
    sizes = (10, 50, 100) if quick else (10, 25, 50, 75, 100)
    scaling = []
    for n in sizes:
        engine, mean_n = engine_rate(n, steps, with_obs=False)
        full, _ = engine_rate(n, steps // 2, with_obs=True)
        scaling.append(
            {
                "max_aircraft": n,
                "mean_taxiing": mean_n,
                "engine_steps_per_s": engine,
                "env_steps_per_s": full,
                "aircraft_steps_per_s": engine * mean_n,
            }
        )
        print(
            f"{n:4d} aircraft (mean {mean_n:5.1f} taxiing): engine {engine:8.1f} steps/s, "
            f"env with observations {full:7.1f} steps/s"
        )
    densities = ("medium",) if quick else DENSITIES
    seeds = [100, 101] if quick else [100, 101, 102]
    latency: dict[str, dict[str, dict[str, float]]] = {}
    for density in densities:
        params = TaxiwayParams(layout="large", density=density, max_slots=40)
        model = sb3_contrib.MaskablePPO(
            "MlpPolicy",
            AgentSlotVecEnv([lambda p=params: make_env(p)], seed=0),
            n_steps=64,
            seed=0,
            device="cpu",
        )
        policies = {
            "shortest-path": ShortestPath("shortest-path"),
            "fcfs": FCFS("fcfs"),
            "prioritized": Prioritized("prioritized"),
            "cbs": CBS("cbs", time_limit_s=0.3, max_agents=6),
            "maskable-ppo": SB3Policy("maskable-ppo", model),
        }
        latency[density] = {}
        for name, policy in policies.items():
            row = decision_latency(policy, params, seeds)
            if name == "maskable-ppo":  # an untrained network: only its cost is meaningful
                row = {"decision_ms": row["decision_ms"]}
            latency[density][name] = row
            plan = row.get("plan_ms", 0.0)
            print(f"{density:6s} {name:14s} {row['decision_ms']:8.3f} ms/decision, plan {plan:7.2f} ms")
    ref = densities[-1]
    top = scaling[-1]
    write_result(
        RESULT,
        {
            "benchmark": "taxiway engine steps/s vs aircraft; per-decision latency of each controller",
            "date": dt.date.today().isoformat(),
            "machine": machine_info(numpy=np.__version__, torch=torch.__version__),
            "quick": quick,
            "layout": "large",
            "scaling": scaling,
            "latency_layout": "large, max_slots 40",
            "latency_seeds": seeds,
            "latency": latency,
            "headline": [
                {
                    "label": f"taxiway engine, {top['max_aircraft']} aircraft allowed (mean "
                    f"{top['mean_taxiing']:.0f} taxiing): aircraft-steps/s incl. exact conflict detection",
                    "value": top["aircraft_steps_per_s"],
                    "unit": "per s",
                },
                {
                    "label": f"taxiway MaskablePPO network, ms per aircraft decision (large airport, {ref})",
                    "value": latency[ref]["maskable-ppo"]["decision_ms"],
                    "unit": "ms",
                    "target": "<= 5 ms",
                },
                {
                    "label": f"taxiway prioritized planning, ms per aircraft decision (large airport, {ref})",
                    "value": latency[ref]["prioritized"]["decision_ms"],
                    "unit": "ms",
                },
                {
                    "label": f"taxiway prioritized planning, ms per plan (large airport, {ref})",
                    "value": latency[ref]["prioritized"]["plan_ms"],
                    "unit": "ms",
                },
            ],
            "curves": [
                {
                    "title": "engine speed vs aircraft on the surface (large airport)",
                    "xlabel": "aircraft allowed to taxi at once",
                    "ylabel": "steps/s",
                    "log": True,
                    "series": {
                        "engine (moves + conflict detection)": {
                            "x": list(sizes),
                            "y": [r["engine_steps_per_s"] for r in scaling],
                        },
                        "PettingZoo env (+ masks, observations)": {
                            "x": list(sizes),
                            "y": [r["env_steps_per_s"] for r in scaling],
                        },
                    },
                },
                {
                    "title": "computation per aircraft decision by traffic density (large airport)",
                    "xlabel": "movements per hour",
                    "ylabel": "ms per decision",
                    "log": True,
                    "series": {
                        name: {
                            "x": [TaxiwayParams(layout="large", density=d).rate() for d in densities],
                            "y": [latency[d][name]["decision_ms"] for d in densities],
                        }
                        for name in latency[ref]
                    },
                },
            ],
        },
    )


if __name__ == "__main__":
    main()
