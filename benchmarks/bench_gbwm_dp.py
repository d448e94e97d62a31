"""GBWM dynamic-programming solve time and accuracy.

Run: ``python benchmarks/bench_gbwm_dp.py``. Writes ``benchmarks/results/gbwm_dp.json`` and prints
a table: solve time (best of several repeats) for the Das et al. (2020) single-goal base case and the
16-goal benchmark problem, the optimal values of the whole benchmark family with a Monte Carlo check
of the DP policy, the base case's P(goal) against grid density and transition method, and the
meta-RL decision latency against DP solve time on the same random problems (the meta-RL network is
the one `wealth/meta` trains, 256x256; untrained weights, which cost the same as trained ones).
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import numpy as np
import scipy
from _common import machine_info, quick_mode, write_result

from fieldrl.simulators.gbwm import Goal, Problem, benchmark_problem, sample_problem, simulate
from fieldrl.simulators.gbwm_dp import solve

REPEATS = 7
MC_PATHS = 20_000
META_PROBLEMS = 30
INVESTORS = 1000
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


def meta_rl_vs_dp(n_problems: int, repeats: int) -> dict:
    """Per-problem time: DP solve vs the meta-RL policy's T decisions, on the same random problems.

    One core for both (torch and numpy single-threaded). "Sequential": one investor, T forward
    passes of batch 1 (observation built each year). "Batched": INVESTORS investors with different
    problems advised together, so each investor's share of a batch forward pass, times T."""
    import torch
    from stable_baselines3 import PPO

    from fieldrl.domains.wealth.env import WealthEnv, observe

    torch.set_num_threads(1)
    rng = np.random.default_rng(7)
    problems = [sample_problem(rng, 2) for _ in range(n_problems)]
    env = WealthEnv(random=True, max_obs_goals=4, max_levels=2)
    model = PPO("MlpPolicy", env, policy_kwargs={"net_arch": [256, 256]}, device="cpu", seed=0)
    dp = [best_time(p, repeats) for p in problems]

    def sequential(problem: Problem) -> float:
        start = time.perf_counter()
        for t in range(problem.T):
            model.predict(observe(problem, t, problem.W0, 4, 2), deterministic=True)
        return time.perf_counter() - start

    seq = [min(sequential(p) for _ in range(repeats)) for p in problems]
    batch = np.stack(
        [
            observe(p, int(rng.integers(0, p.T)), p.W0 * rng.lognormal(0, 0.3), 4, 2)
            for p in (problems[i % n_problems] for i in range(INVESTORS))
        ]
    )
    best_batch = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        model.predict(batch, deterministic=True)
        best_batch = min(best_batch, time.perf_counter() - start)
    mean_T = float(np.mean([p.T for p in problems]))
    batched = best_batch / INVESTORS * mean_T
    return {
        "problems": n_problems,
        "mean_horizon_years": mean_T,
        "dp_solve_ms_mean": float(np.mean(dp)) * 1e3,
        "dp_solve_ms_median": float(np.median(dp)) * 1e3,
        "meta_rl_sequential_ms_per_problem": float(np.mean(seq)) * 1e3,
        "meta_rl_batch_of_investors_ms": best_batch * 1e3,
        "investors_in_batch": INVESTORS,
        "meta_rl_batched_ms_per_problem": batched * 1e3,
        "speedup_sequential": float(np.mean(dp) / np.mean(seq)),
        "speedup_batched": float(np.mean(dp) / batched),
    }


def main() -> dict:
    global REPEATS, MC_PATHS
    meta_problems = META_PROBLEMS
    if quick_mode():
        REPEATS, MC_PATHS, meta_problems = 2, 4000, 8
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
    meta = meta_rl_vs_dp(meta_problems, min(REPEATS, 3))
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
        "meta_rl_vs_dp": meta,
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
            {
                "label": f"meta-RL vs DP per problem, {INVESTORS} investors batched (same run and problems)",
                "value": meta["speedup_batched"],
                "unit": "x",
                "target": ">= 100x",
            },
            {
                "label": "meta-RL vs DP per problem, one investor, decisions one by one",
                "value": meta["speedup_sequential"],
                "unit": "x",
                "target": ">= 100x",
            },
            {
                "label": f"meta-RL decision latency, batch of {INVESTORS} investors",
                "value": meta["meta_rl_batch_of_investors_ms"],
                "unit": "ms",
            },
        ],
    }
    written = write_result(RESULT, result)

    print(f"base case: P(goal) = {sol.p_goal:.4f}, solve {timings['base_case']['seconds'] * 1e3:.1f} ms")
    print(f"16-goal problem: solve {timings['benchmark_16_goals']['seconds'] * 1e3:.1f} ms")
    print(f"{'goals':>5} {'W0':>7} {'DP value':>9} {'MC of DP policy':>16} {'max':>6}")
    for n, row in family.items():
        mc = f"{row['mc_value_of_dp_policy']:.2f} ± {row['mc_stderr']:.2f}"
        print(f"{n:>5} {row['W0']:>7.2f} {row['dp_value']:>9.3f} {mc:>16} {row['max_utility']:>6.0f}")
    for row in convergence:
        print(f"rho_grid={row['grid_density']:<3} {row['method']:<8} P(goal) = {row['p_goal']:.4f}")
    print(
        f"meta-RL vs DP on {meta['problems']} random problems: DP {meta['dp_solve_ms_mean']:.1f} ms, "
        f"meta-RL {meta['meta_rl_sequential_ms_per_problem']:.2f} ms one by one "
        f"({meta['speedup_sequential']:.0f}x), {meta['meta_rl_batched_ms_per_problem']:.4f} ms batched "
        f"({meta['speedup_batched']:.0f}x)"
    )
    print(f"wrote {written}")
    return result


if __name__ == "__main__":
    main()
