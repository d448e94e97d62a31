"""GBWM engine and DP: frontier numbers, the published base case, MC vs DP, brute force, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import trapezoid
from scipy.special import ndtr

from fieldrl.simulators.gbwm.dp import make_grid, solve
from fieldrl.simulators.gbwm.engine import (
    DEFAULT_COV,
    DEFAULT_MEANS,
    Frontier,
    Goal,
    Problem,
    WealthBatch,
    benchmark_problem,
    frontier_coefficients,
    sample_problem,
    simulate,
)

Z99 = 2.5758  # two-sided 99 % normal quantile


def base_case() -> Problem:
    """Das et al. (2020): W0 = 100, one goal of 200 at T = 10, 15 portfolios, annual rebalancing."""
    return Problem(10, 100.0, (Goal.single(10, 200.0),))


# ------------------------------------------------------------------ frontier
def _min_variance_sigma(mu: float) -> float:
    """Hand route: minimise w'Sw s.t. w'm = mu, w'1 = 1 by solving the KKT linear system."""
    n = len(DEFAULT_MEANS)
    kkt = np.zeros((n + 2, n + 2))
    kkt[:n, :n] = 2 * DEFAULT_COV
    kkt[:n, n] = kkt[n, :n] = DEFAULT_MEANS
    kkt[:n, n + 1] = kkt[n + 1, :n] = 1.0
    w = np.linalg.solve(kkt, np.r_[np.zeros(n), mu, 1.0])[:n]
    return math.sqrt(w @ DEFAULT_COV @ w)


def test_frontier_coefficients_match_hand_computed_values() -> None:
    a, b, c = frontier_coefficients(DEFAULT_MEANS, DEFAULT_COV)
    assert a == pytest.approx(28.3286, abs=1e-4)
    assert b == pytest.approx(-2.97586, abs=1e-5)
    assert c == pytest.approx(0.0795245, abs=1e-7)


def test_default_frontier_endpoints_are_minimum_variance_portfolios() -> None:
    f = Frontier.default()
    assert f.k == 15
    assert f.mu[0] == pytest.approx(0.0526) and f.mu[-1] == pytest.approx(0.0886)
    assert np.allclose(np.diff(f.mu), 0.036 / 14)
    assert f.sigma[0] == pytest.approx(0.037051, abs=1e-6)
    assert f.sigma[-1] == pytest.approx(0.195555, abs=1e-6)
    for mu, sigma in zip(f.mu, f.sigma, strict=True):
        assert sigma == pytest.approx(_min_variance_sigma(mu), rel=1e-9)
    assert np.all(np.diff(f.sigma) > 0)


def test_frontier_from_portfolios_keeps_the_given_pairs() -> None:
    f = Frontier.from_portfolios([(0.03, 0.02), (0.07, 0.15)])
    assert f.mu.tolist() == [0.03, 0.07] and f.sigma.tolist() == [0.02, 0.15]
    assert f == Frontier([0.03, 0.07], [0.02, 0.15])


# ------------------------------------------------------------------ DP base case
def test_dp_reproduces_published_single_goal_probability() -> None:
    sol = solve(base_case())
    assert sol.p_goal == pytest.approx(0.669, abs=0.005)
    # a finer grid converges close to the same number
    assert solve(base_case(), grid_density=5).p_goal == pytest.approx(0.670, abs=0.002)


def test_dp_policy_monte_carlo_matches_dp_value_base_case() -> None:
    problem = base_case()
    sol = solve(problem)
    res = simulate(problem, sol.act, 20_000, np.random.default_rng(0))
    assert abs(res.mean_utility - sol.value_w0) <= Z99 * res.stderr


def test_dp_policy_monte_carlo_matches_dp_value_four_goal_benchmark() -> None:
    problem = benchmark_problem(4)
    sol = solve(problem)
    res = simulate(problem, sol.act, 20_000, np.random.default_rng(1))
    assert abs(res.mean_utility - sol.value_w0) <= Z99 * res.stderr
    assert res.goals_taken.shape == (20_000, 4)
    assert np.all(res.utility <= problem.max_utility + 1e-9)


def test_fixed_portfolio_monte_carlo_matches_lognormal_probability() -> None:
    problem = base_case()
    k = 7
    f = problem.frontier
    exact = ndtr((math.log(100 / 200) + f.drift[k] * 10) / (f.sigma[k] * math.sqrt(10)))
    res = simulate(problem, lambda t, w: (0, k), 20_000, np.random.default_rng(2))
    assert abs(res.mean_utility - exact) <= Z99 * res.stderr
    assert solve(problem).value_w0 >= exact


# ------------------------------------------------------------------ brute force on a tiny problem
def test_tiny_problem_exhaustive_optimum_equals_dp_on_a_fine_grid() -> None:
    """T = 2, two portfolios, a goal at t = 1 and one at T.

    Exact optimum by enumerating every decision: at t = 1 all (take goal?, portfolio)
    choices are compared in closed form (lognormal tail), at t = 0 both portfolios are
    integrated over the market draw by quadrature.
    """
    frontier = Frontier.from_portfolios([(0.04, 0.05), (0.10, 0.25)])
    c1, u1, g2, u2 = 30.0, 1.0, 90.0, 2.0
    problem = Problem(2, 100.0, (Goal.single(1, c1, u1), Goal.single(2, g2, u2)), frontier)
    d, s = frontier.drift, frontier.sigma

    def v1(w: np.ndarray) -> np.ndarray:
        best = np.zeros_like(w)
        for k in range(2):
            best = np.maximum(best, u2 * ndtr((np.log(w / g2) + d[k]) / s[k]))
            paid = np.log(np.maximum(w - c1, 1e-300) / g2)
            best = np.where(w >= c1, np.maximum(best, u1 + u2 * ndtr((paid + d[k]) / s[k])), best)
        return best

    z = np.linspace(-10, 10, 400_001)
    phi = np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    exact = max(trapezoid(v1(100 * np.exp(d[k] + s[k] * z)) * phi, z) for k in range(2))
    sol = solve(problem, grid_density=20)
    assert sol.value_w0 == pytest.approx(exact, abs=1e-4)
    assert solve(problem, grid_density=20, method="cdf").value_w0 == pytest.approx(exact, abs=1e-4)


# ------------------------------------------------------------------ vectorised vs slow loop
def _slow_values(problem: Problem, grid: np.ndarray) -> tuple[np.ndarray, float]:
    """Plain-Python backward induction with the same grid and density transitions."""
    T, f = problem.T, problem.frontier
    wealth = [math.exp(x) for x in grid]
    lo, hi = wealth[0], wealth[-1]

    def cont(t: int, x: float, v_next: list[float]) -> float:
        lx = math.log(min(max(x, lo), hi))
        best = -math.inf
        for mu, sigma in zip(f.mu, f.sigma, strict=True):
            dens = [math.exp(-0.5 * ((g - lx - (mu - sigma**2 / 2)) / sigma) ** 2) for g in grid]
            best = max(best, sum(p * v for p, v in zip(dens, v_next, strict=True)) / sum(dens))
        return best

    def bellman(t: int, w: float, v_next: list[float]) -> float:
        best = -math.inf
        for cost, util in zip(problem.option_cost[t], problem.option_utility[t], strict=True):
            if cost <= w:
                best = max(best, util + cont(t, w - cost + problem.infusion[t], v_next))
        return best

    terminal = [
        max([u for c, u in zip(problem.option_cost[T], problem.option_utility[T], strict=True) if c <= w])
        for w in wealth
    ]
    values = [terminal]
    for t in range(T - 1, -1, -1):
        values.insert(0, [bellman(t, w, values[0]) for w in wealth])
    return np.array(values), bellman(0, problem.W0, values[1])


def test_vectorised_dp_equals_slow_reference_loop() -> None:
    frontier = Frontier.from_portfolios([(0.03, 0.04), (0.06, 0.12), (0.09, 0.22)])
    goals = (Goal(1, ((5.0, 1.0), (12.0, 3.0))), Goal(0, ((2.0, 0.5),)), Goal(3, ((20.0, 2.0),)))
    problem = Problem(3, 20.0, goals, frontier, infusions=(2.0, 0.0, 1.0))
    sol = solve(problem, grid_density=0.5)
    assert 20 < len(sol.log_grid) < 120
    ref_table, ref_w0 = _slow_values(problem, sol.log_grid)
    np.testing.assert_allclose(sol.value, ref_table, rtol=1e-12, atol=1e-12)
    assert sol.value_w0 == pytest.approx(ref_w0, rel=1e-12)


# ------------------------------------------------------------------ grid
def test_grid_places_goal_midway_and_covers_small_wealth_when_goals_come_early() -> None:
    grid = make_grid(base_case())
    dx = grid[1] - grid[0]
    assert dx == pytest.approx(Frontier.default().sigma.min())
    offset = (math.log(200) - grid[0]) / dx
    assert offset - math.floor(offset) == pytest.approx(0.5)
    assert grid[0] < math.log(100) - 1.5 and grid[-1] > math.log(100) + 2.5
    multi = make_grid(benchmark_problem(4))
    assert math.exp(multi[0]) < 1.0  # wealth left after paying a goal can be small


# ------------------------------------------------------------------ engine semantics
def test_unaffordable_or_absent_goal_choice_means_take_nothing() -> None:
    frontier = Frontier.from_portfolios([(0.0, 1e-9)])
    problem = Problem(3, 10.0, (Goal(1, ((4.0, 1.0), (20.0, 5.0))), Goal.single(3, 6.0, 2.0)), frontier)
    batch = WealthBatch(problem, 3)
    z = np.zeros(3)
    reward, done = batch.step(np.array([1, 2, 0]), np.zeros(3), z)  # no goal at t = 0
    assert reward.tolist() == [0, 0, 0] and batch.wealth == pytest.approx([10, 10, 10])
    reward, _ = batch.step(np.array([1, 2, 0]), np.zeros(3), z)  # level 2 costs 20 > 10
    assert reward.tolist() == [1, 0, 0]
    assert batch.wealth == pytest.approx([6, 10, 10])
    reward, done = batch.step(np.zeros(3), np.zeros(3), z)  # reaching T settles the terminal goal
    assert done.all() and reward.tolist() == [2, 2, 2]
    assert batch.goals_taken.tolist() == [[1, 1], [0, 1], [0, 1]]
    assert batch.terminal_wealth == pytest.approx([6, 10, 10])
    assert batch.wealth == pytest.approx([0, 4, 4])


def test_simulate_records_paths_and_applies_infusions() -> None:
    frontier = Frontier.from_portfolios([(0.0, 1e-9)])
    problem = Problem(2, 10.0, (), frontier, infusions=(1.0, 2.0))
    res = simulate(problem, lambda t, w: (0, 0), 4, np.random.default_rng(0))
    np.testing.assert_allclose(res.wealth, np.tile([10.0, 11.0, 13.0], (4, 1)), rtol=1e-7)
    assert res.utility.tolist() == [0, 0, 0, 0]


# ------------------------------------------------------------------ problem family
def test_benchmark_problem_family() -> None:
    p = benchmark_problem(4)
    assert p.T == 16 and [g.time for g in p.goals] == [4, 8, 12, 16]
    assert p.goals[1].levels == ((10 * 1.08**8, 18.0),)
    assert math.isclose(p.W0, 12 * 4**0.85)
    assert [len(benchmark_problem(n).goals) for n in (1, 2, 4, 8, 16)] == [1, 2, 4, 8, 16]
    with pytest.raises(ValueError, match="n_goals"):
        benchmark_problem(3)


def test_sampled_problems_are_valid_and_solvable() -> None:
    rng = np.random.default_rng(5)
    for _ in range(3):
        p = sample_problem(rng)
        assert 10 <= p.T <= 20 and 1 <= len(p.goals) <= 16 and p.k == 15 and p.max_levels <= 2
        sol = solve(p)
        assert 0 <= sol.value_w0 <= p.max_utility + 1e-9


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Problem(0, 100.0), "T"),
        (lambda: Problem(10, -5.0), "W0"),
        (lambda: Problem(10, 0.0), "W0"),
        (lambda: Problem(10, 100.0, (Goal.single(11, 1.0),)), "goals[0].time"),
        (lambda: Problem(10, 100.0, (Goal.single(-1, 1.0),)), "goals[0].time"),
        (lambda: Problem(10, 100.0, (Goal.single(3, 1.0), Goal.single(3, 2.0))), "goals"),
        (lambda: Problem(3, 100.0, infusions=(1.0, 1.0)), "infusions"),
        (lambda: Problem(2, 100.0, infusions=(1.0, -1.0)), "infusions"),
        (lambda: Problem(2, 100.0, frontier="default"), "frontier"),
        (lambda: Frontier([], []), "mu"),
        (lambda: Frontier([0.05], [0.0]), "sigma"),
        (lambda: Frontier([0.05, 0.06], [0.1]), "sigma"),
        (lambda: Goal(1, ()), "levels"),
        (lambda: Goal(1, ((-1.0, 1.0),)), "cost"),
        (lambda: Goal(1, ((1.0, math.nan),)), "utility"),
        (lambda: Goal(1.5, ((1.0, 1.0),)), "time"),
        (lambda: Frontier.from_assets([0.05, 0.08], np.array([[0.01, 0.02], [0.02, 0.01]])), "cov"),
        (lambda: Frontier.from_assets(DEFAULT_MEANS, DEFAULT_COV, mu_min=0.09, mu_max=0.08), "mu_min"),
    ],
)
def test_validation_errors_name_the_field(build, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        build()


def test_solver_rejects_bad_grid_settings() -> None:
    with pytest.raises(ValueError, match="grid_density"):
        solve(base_case(), grid_density=0)
    with pytest.raises(ValueError, match="method"):
        solve(base_case(), method="spline")  # type: ignore[arg-type]
