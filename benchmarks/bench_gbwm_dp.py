"""GBWM dynamic-programming solve time and accuracy.

Run: ``python benchmarks/bench_gbwm_dp.py``. Writes ``benchmarks/results/gbwm_dp.json`` and prints
a table: solve time (best of several repeats) for the Das et al. (2020) single-goal base case and the
16-goal benchmark problem, the optimal values of the whole benchmark family with a Monte Carlo check
of the DP policy, and the base case's P(goal) against grid density and transition method.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import numpy as np
import scipy
from _common import machine_info, quick_mode, write_result

from fieldrl.simulators.gbwm import Goal, Problem, benchmark_problem, simulate
from fieldrl.simulators.gbwm_dp import solve

REPEATS = 7
MC_PATHS = 20_000
RESULT = Path(__file__).parent / "results" / "gbwm_dp.json"


def base_case() -> Problem:
    return Problem(10, 100.0, (Goal.single(10, 200.0),))


def best_time(problem: Problem, repeats: int = REPEATS, **kwargs) -> float:
    """Best wall time in seconds of ``solve(problem, **kwargs)``."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        solve(problem, **kwargs)
        best = min(best, time.perf_counter() - start)
    return float(best)


def main() -> dict:
    global REPEATS, MC_PATHS
    if quick_mode():
        REPEATS, MC_PATHS = 2, 4000
    base = base_case()
    sol = solve(base)
    timings = {
        "base_case": {
            "seconds": best_time(base),
            "grid_points": len(sol.log_grid),
            "p_goal": sol.p_goal,
        },
        "benchmark_16_goals": {
            "seconds": best_time(benchmark_problem(16)),
            "grid_points": len(solve(benchmark_problem(16)).log_grid),
        },
    }
    family = {}
    for n_goals in (1, 2, 4, 8, 16):
        problem = benchmark_problem(n_goals)
        s = solve(problem)
        mc = simulate(problem, s.act, MC_PATHS, np.random.default_rng(n_goals))
        family[str(n_goals)] = {
            "W0": problem.W0,
            "max_utility": problem.max_utility,
            "dp_value": s.value_w0,
            "mc_value_of_dp_policy": mc.mean_utility,
            "mc_stderr": mc.stderr,
            "mc_goals_taken_pct": float((mc.goals_taken > 0).mean() * 100),
            "grid_points": len(s.log_grid),
        }
    convergence = [
        {"grid_density": rho, "method": method, "p_goal": solve(base, grid_density=rho, method=method).p_goal}
        for rho in (1, 2, 5, 10)
        for method in ("density", "cdf")
    ]
    result = {
        "benchmark": "GBWM backward-induction DP (fieldrl.simulators.gbwm_dp.solve)",
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(numpy=np.__version__, scipy=scipy.__version__),
        "settings": {
            "grid_density": 1.0,
            "n_sd": 3.0,
            "method": "density",
            "repeats": REPEATS,
            "mc_paths": MC_PATHS,
        },
        "timings": timings,
        "benchmark_family": family,
        "base_case_convergence": convergence,
        "published_base_case_p_goal": 0.669,
        "headline": [
            {
                "label": "GBWM DP base case (10 y, W0=100, goal 200): P(goal), published 0.669",
                "value": sol.p_goal,
                "unit": "",
                "target": "0.669 +/- 0.005",
            },
            {
                "label": "GBWM DP solve, base case",
                "value": timings["base_case"]["seconds"] * 1e3,
                "unit": "ms",
            },
            {
                "label": "GBWM DP solve, 16 goals",
                "value": timings["benchmark_16_goals"]["seconds"] * 1e3,
                "unit": "ms",
            },
        ],
    }
    write_result(RESULT, result)

    print(f"base case: P(goal) = {sol.p_goal:.4f}, solve {timings['base_case']['seconds'] * 1e3:.1f} ms")
    print(f"16-goal problem: solve {timings['benchmark_16_goals']['seconds'] * 1e3:.1f} ms")
    print(f"{'goals':>5} {'W0':>7} {'DP value':>9} {'MC of DP policy':>16} {'max':>6}")
    for n, row in family.items():
        mc = f"{row['mc_value_of_dp_policy']:.2f} ± {row['mc_stderr']:.2f}"
        print(f"{n:>5} {row['W0']:>7.2f} {row['dp_value']:>9.3f} {mc:>16} {row['max_utility']:>6.0f}")
    for row in convergence:
        print(f"rho_grid={row['grid_density']:<3} {row['method']:<8} P(goal) = {row['p_goal']:.4f}")
    print(f"wrote {RESULT}")
    return result


if __name__ == "__main__":
    main()
