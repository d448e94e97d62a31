"""GBWM dynamic-programming solve time and accuracy.

Run: ``python benchmarks/bench_gbwm_dp.py``. Writes ``benchmarks/results/gbwm_dp.json`` and prints
a table: solve time (best of several repeats) for the Das et al. (2020) single-goal base case and the
16-goal benchmark problem, on the paper's grid and for the converged reference (``solve_converged``,
what the ``dp`` heuristic and ``pct_of_dp`` use), the optimal values of the whole benchmark family
with a Monte Carlo check of the DP policy, the base case's P(goal) against grid density and transition
method, the error of both against an independent DP (``gbwm_reference``) on random multi-goal problems
(the papers' random family and small frontiers with infusions), and the meta-RL decision latency
against the reference's solve time on the same random problems (the meta-RL network is the one
`wealth/meta` trains, 256x256; untrained weights, which cost the same as trained ones).
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import numpy as np
import scipy
from _common import machine_info, quick_mode, write_result

from fieldrl.simulators.gbwm.dp import solve, solve_converged
from fieldrl.simulators.gbwm.engine import (
    Frontier,
    Goal,
    Problem,
    benchmark_problem,
    sample_problem,
    simulate,
)
from fieldrl.simulators.gbwm.reference import reference_value

REPEATS = 7
MC_PATHS = 20_000
META_PROBLEMS = 30
ACCURACY_PROBLEMS = 20
INVESTORS = 1000
RESULT = Path(__file__).parent / "results" / "gbwm_dp.json"


def base_case() -> Problem:
    return Problem(10, 100.0, (Goal.single(10, 200.0),))


def best_time(problem: Problem, repeats: int = REPEATS, solver=solve_converged, **kwargs) -> float:
    """Best wall time in seconds of ``solver(problem, **kwargs)`` (the reference by default)."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        solver(problem, **kwargs)
        best = min(best, time.perf_counter() - start)
    return float(best)


def small_frontier_problem(rng: np.random.Generator) -> Problem:
    """A random problem with 2-4 portfolios from the default frontier, infusions, wealth scaled down."""
    p = sample_problem(rng)
    k, first = int(rng.integers(2, 5)), int(rng.integers(0, 11))
    idx = np.unique(np.linspace(first, 14, k).round().astype(int))
    frontier = Frontier(p.frontier.mu[idx], p.frontier.sigma[idx])
    infusions = p.infusions if sum(p.infusions) > 0 else tuple(np.full(p.T, 0.05 * p.W0))
    return Problem(p.T, p.W0 * rng.uniform(0.3, 1.0), p.goals, frontier, infusions)


def accuracy(n_problems: int) -> dict:
    """Relative error (%) of the paper's grid and of the converged reference against the independent DP."""
    out = {}
    for family, draw in (("sample_problem", sample_problem), ("small_frontier", small_frontier_problem)):
        rng = np.random.default_rng(11)
        paper, conv, ms, density = [], [], [], []
        for _ in range(n_problems):
            problem = draw(rng)
            ref = reference_value(problem)
            paper.append(100 * (solve(problem).value_w0 / ref - 1))
            start = time.perf_counter()
            sol = solve_converged(problem)
            ms.append((time.perf_counter() - start) * 1e3)
            conv.append(100 * (sol.value_w0 / ref - 1))
            density.append(sol.grid_density)
        out[family] = {
            "problems": n_problems,
            "paper_grid_error_pct": {"min": min(paper), "max": max(paper), "max_abs": max(map(abs, paper))},
            "converged_error_pct": {"min": min(conv), "max": max(conv), "max_abs": max(map(abs, conv))},
            "converged_solve_ms": {"median": float(np.median(ms)), "max": max(ms)},
            "converged_grid_density": {"median": float(np.median(density)), "max": max(density)},
        }
    return out


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
    dp = [best_time(p, repeats) for p in problems]  # the converged reference

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
    meta_problems, accuracy_problems = META_PROBLEMS, ACCURACY_PROBLEMS
    if quick_mode():
        REPEATS, MC_PATHS, meta_problems, accuracy_problems = 2, 4000, 8, 4
    base = base_case()
    sol = solve(base)
    timings = {}
    for name, problem in (("base_case", base), ("benchmark_16_goals", benchmark_problem(16))):
        ref = solve_converged(problem)
        timings[name] = {
            "seconds": best_time(problem),
            "grid_density": ref.grid_density,
            "grid_points": len(ref.log_grid),
            "value": ref.value_w0,
            "paper_grid_seconds": best_time(problem, solver=solve),
            "paper_grid_points": len(solve(problem).log_grid),
            "paper_grid_value": solve(problem).value_w0,
        }
    family = {}
    for n_goals in (1, 2, 4, 8, 16):
        problem = benchmark_problem(n_goals)
        s = solve_converged(problem)
        mc = simulate(problem, s.act, MC_PATHS, np.random.default_rng(n_goals))
        family[str(n_goals)] = {
            "W0": problem.W0,
            "max_utility": problem.max_utility,
            "dp_value": s.value_w0,
            "paper_grid_dp_value": solve(problem).value_w0,
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
    errors = accuracy(accuracy_problems)
    meta = meta_rl_vs_dp(meta_problems, min(REPEATS, 3))
    result = {
        "benchmark": "GBWM backward-induction DP (fieldrl.simulators.gbwm.dp.solve)",
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(numpy=np.__version__, scipy=scipy.__version__),
        "settings": {
            "reference": "solve_converged (rtol 1e-3, densities 2, 4, ... 32, interpolated rows)",
            "paper_grid_density": 1.0,
            "independent_dp": "gbwm_reference.reference_value, density 80",
            "n_sd": 3.0,
            "method": "density",
            "repeats": REPEATS,
            "mc_paths": MC_PATHS,
        },
        "timings": timings,
        "benchmark_family": family,
        "base_case_convergence": convergence,
        "accuracy_vs_independent_dp": errors,
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
                "label": "GBWM DP reference solve (converged grid), base case",
                "value": timings["base_case"]["seconds"] * 1e3,
                "unit": "ms",
                "target": "<= 300 ms",
            },
            {
                "label": "GBWM DP reference solve (converged grid), 16 goals",
                "value": timings["benchmark_16_goals"]["seconds"] * 1e3,
                "unit": "ms",
            },
            {
                "label": "GBWM DP reference vs independent DP, random problems: largest |error|",
                "value": max(e["converged_error_pct"]["max_abs"] for e in errors.values()),
                "unit": "%",
                "target": "<= 0.2 %",
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

    for name, row in timings.items():
        print(
            f"{name}: reference {row['value']:.4f} in {row['seconds'] * 1e3:.1f} ms (density "
            f"{row['grid_density']:g}, {row['grid_points']} points); paper grid "
            f"{row['paper_grid_value']:.4f} in {row['paper_grid_seconds'] * 1e3:.1f} ms"
        )
    for name, row in errors.items():
        paper, conv = row["paper_grid_error_pct"], row["converged_error_pct"]
        median_ms = row["converged_solve_ms"]["median"]
        print(
            f"{name} ({row['problems']} problems) vs independent DP: paper grid "
            f"{paper['min']:+.2f}..{paper['max']:+.2f} %, "
            f"reference {conv['min']:+.3f}..{conv['max']:+.3f} %, median {median_ms:.0f} ms"
        )
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
