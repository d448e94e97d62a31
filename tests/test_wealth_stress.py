"""Stress axes of the wealth domain: the capital market regime moved away from the one a run trained in
(mean returns, volatilities, inflation of goal costs); nothing retrained, the DP optimum solved again."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import one_line_exit_2

from fieldrl import api
from fieldrl.domains import get_domain
from fieldrl.domains.wealth.heuristics import dp_solution
from fieldrl.domains.wealth.stress import frontier_portfolios
from fieldrl.evaluation import runner
from fieldrl.evaluation.stress import STRESS_RESULTS
from fieldrl.scenario import load_scenario

DOMAIN = get_domain("wealth")
SCENARIOS = ["single-goal", "multi-goal", "meta", "inflation"]
ORDER = ["variant", "policy", "train_seed", "eval_seed", "episode", "metric"]
#: the published single-goal base case
BASE_CASE: dict[str, Any] = {
    "T": 10,
    "W0": 100,
    "goals": [{"time": 10, "levels": [[200, 1]]}],
    "max_levels": 1,
}


def _worlds(name: str) -> list[tuple[str, dict[str, Any]]]:
    """``(where, raw params)`` of every stressed setting of a built-in scenario, as each policy runs it."""
    scenario = load_scenario(f"wealth/{name}", build=False)
    worlds = []
    for variant in scenario.stressed_variants:
        worlds.append((variant, scenario.variant_params(variant)))
        for entry in scenario.policies.learned:
            worlds.append((f"{variant}/{entry.label}", scenario.policy_params(variant, entry.label)))
    return worlds


def _applies(raw: dict[str, Any], axis: str) -> bool:
    """Whether ``axis`` can move this world: the market axes always can, inflation needs it on."""
    applies = True if axis != "inflation" else raw.get("inflation") is not None
    assert applies == (DOMAIN.stress_axes[axis].problem(raw) is None), (axis, raw)  # the axis says so too
    return applies


CASES = [(name, axis) for name in SCENARIOS for axis in DOMAIN.stress_axes]


@pytest.mark.parametrize(("name", "axis"), CASES, ids=[f"{n}-{a}" for n, a in CASES])
def test_the_trained_value_leaves_every_stressed_setting_as_it_was(name: str, axis: str) -> None:
    stress = DOMAIN.stress_axes[axis]
    for where, raw in _worlds(name):
        params = DOMAIN.params_model.model_validate(raw)
        if not _applies(raw, axis):
            continue
        again = DOMAIN.params_model.model_validate(stress.apply(raw, stress.trained(params)))
        assert again == params, where


@pytest.mark.parametrize(("name", "axis"), CASES, ids=[f"{n}-{a}" for n, a in CASES])
def test_every_default_point_is_valid_keeps_the_spaces_and_moves_the_world(name: str, axis: str) -> None:
    stress = DOMAIN.stress_axes[axis]
    for where, raw in _worlds(name):
        if not _applies(raw, axis):
            continue
        params = DOMAIN.params_model.model_validate(raw)
        plain = DOMAIN.make_env(params)
        for value in stress.points:
            world = DOMAIN.params_model.model_validate(stress.apply(raw, value))
            env = DOMAIN.make_env(world)
            assert env.observation_space == plain.observation_space, (where, value)
            assert env.action_space == plain.action_space, (where, value)
            assert (world == params) == (value == stress.trained(params)), (where, value)


def test_the_market_axes_move_exactly_what_they_say() -> None:
    raw = dict(BASE_CASE)
    mu, sigma = frontier_portfolios(raw)
    shifted = frontier_portfolios(DOMAIN.stress_axes["mean_shift"].apply(raw, -1.5))
    assert np.array_equal(shifted[0], mu - 0.015) and np.array_equal(shifted[1], sigma)
    scaled = frontier_portfolios(DOMAIN.stress_axes["vol_scale"].apply(raw, 2.0))
    assert np.array_equal(scaled[0], mu) and np.array_equal(scaled[1], 2.0 * sigma)
    inflated = DOMAIN.stress_axes["inflation"].apply({**raw, "inflation": {"mean": 0.025, "rho": 0.5}}, 4.0)
    assert inflated["inflation"] == {"mean": 0.04, "rho": 0.5}


def test_pct_of_dp_is_against_the_stressed_world_s_own_optimum() -> None:
    raw = dict(BASE_CASE)
    plain = DOMAIN.params_model.model_validate(raw)
    world = DOMAIN.params_model.model_validate(DOMAIN.stress_axes["vol_scale"].apply(raw, 2.0))
    envs = DOMAIN.make_eval_envs(world, [1, 2, 3])
    envs.reset()
    optimum = dp_solution(world.problem()).value_w0
    assert np.allclose(envs.initial_info["dp_value"], optimum)
    assert abs(optimum - dp_solution(plain.problem()).value_w0) > 0.05  # 0.590 against 0.670
    spec = DOMAIN.heuristics["dp"]
    assert spec.build(spec.settings_model(), world, "DP optimum").problem == world.problem()


def test_opposite_points_keep_separate_results() -> None:
    paths = {runner.partial_results(runner.EvalJob("default", "PPO", 0, "mean_shift", v))[0] for v in (-1, 1)}
    assert len(paths) == 2


def test_random_problems_market_axes_move_every_drawn_frontier_and_nothing_else() -> None:
    """Meta-RL (``random: true``): every problem drawn has its frontier moved; the draws are the same."""
    raw = {"random": True, "max_levels": 2}
    shifted = DOMAIN.params_model.model_validate(DOMAIN.stress_axes["mean_shift"].apply(raw, -1.5))
    scaled = DOMAIN.params_model.model_validate(DOMAIN.stress_axes["vol_scale"].apply(raw, 2.0))
    plain = DOMAIN.params_model.model_validate(raw)
    base = DOMAIN.make_eval_envs(plain, [7, 8], [7, 8])
    for world, check in ((shifted, "mean"), (scaled, "vol")):
        envs = DOMAIN.make_eval_envs(world, [7, 8], [7, 8])
        for moved, own in zip(envs.problems, base.problems, strict=True):
            assert (moved.T, moved.W0, moved.goals) == (own.T, own.W0, own.goals)
            if check == "mean":
                assert np.allclose(moved.frontier.mu, own.frontier.mu - 0.015)
                assert np.array_equal(moved.frontier.sigma, own.frontier.sigma)
            else:
                assert np.array_equal(moved.frontier.mu, own.frontier.mu)
                assert np.allclose(moved.frontier.sigma, 2.0 * own.frontier.sigma)
    assert DOMAIN.stress_axes["mean_shift"].trained(plain) == 0.0


def test_a_fixed_problem_refuses_the_random_problems_market_fields_in_one_line(tmp_path: Path) -> None:
    data = {
        "name": "fixed-market",
        "domain": "wealth",
        "params": {"benchmark": 1, "market_mean_shift": 1.0},
        "policies": {"heuristics": [{"use": "fixed-portfolio"}]},
        "seeds": {"train": [0], "eval": [1]},
    }
    path = tmp_path / "fixed.yaml"
    path.write_text(yaml.safe_dump(data))
    one_line_exit_2(["validate", str(path)], "market_mean_shift", "random problems", "frontier")


# ----------------------------------------------------------------------------- a tiny run, stressed


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base case with the DP optimum, one fixed mix and a tiny PPO, trained and evaluated (no report)."""
    base = tmp_path_factory.mktemp("wealth-stress")
    data = {
        "name": "tiny-wealth",
        "domain": "wealth",
        "params": {**copy.deepcopy(BASE_CASE), "max_obs_goals": 1},
        "policies": {
            "heuristics": [
                {"use": "dp", "name": "DP optimum"},
                {"use": "fixed-portfolio", "name": "aggressive"},
            ],
            "learned": [
                {
                    "algorithm": "ppo",
                    "name": "PPO",
                    "train_steps": 256,
                    "n_envs": 4,
                    "hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 1, "gamma": 1.0},
                }
            ],
        },
        "seeds": {"train": [0], "eval": [10, 11, 12]},
        "episodes_per_seed": 4,
        "report": {"primary_kpi": "pct_of_dp"},
    }
    (base / "tiny.yaml").write_text(yaml.safe_dump(data))
    run_dir = api.train(base / "tiny.yaml", out=base / "run", show_progress=False)
    api.evaluate(run_dir, show_progress=False)
    return Path(run_dir)


@pytest.mark.parametrize(("axis", "points"), [("mean_shift", [-1.5, 0.0]), ("vol_scale", [1.0, 2.0])])
def test_the_trained_point_replays_the_plain_evaluation_and_the_other_moves_it(
    tiny_run: Path, axis: str, points: list[float]
) -> None:
    api.stress(tiny_run, [(axis, points)], show_progress=False)
    plain = pd.read_parquet(tiny_run / "results.parquet").sort_values(ORDER).reset_index(drop=True)
    stressed = pd.read_parquet(tiny_run / STRESS_RESULTS)
    stressed = stressed[stressed["axis"] == axis]
    trained, other = (0.0, -1.5) if axis == "mean_shift" else (1.0, 2.0)
    at_trained = stressed[stressed["point"] == trained].drop(columns=["axis", "point"])
    assert at_trained.sort_values(ORDER).reset_index(drop=True).equals(plain)
    moved = stressed[stressed["point"] == other].drop(columns=["axis", "point"]).sort_values(ORDER)
    moved = moved.reset_index(drop=True)
    assert len(moved) == len(plain) and set(moved["policy"]) == {"DP optimum", "aggressive", "PPO"}
    for policy in ("DP optimum", "aggressive", "PPO"):
        wealth = (moved["policy"] == policy) & (moved["metric"] == "final_wealth")
        assert not np.array_equal(moved.loc[wealth, "value"], plain.loc[wealth, "value"]), policy
    # % of DP at the other point is against that world's optimum, not the trained one's
    world = DOMAIN.params_model.model_validate(
        DOMAIN.stress_axes[axis].apply({**BASE_CASE, "max_obs_goals": 1}, other)
    )
    optimum = dp_solution(world.problem()).value_w0
    rows = moved[moved["policy"] == "DP optimum"].pivot(index=["eval_seed", "episode"], columns="metric")
    assert np.allclose(rows[("value", "pct_of_dp")], 100.0 * rows[("value", "utility")] / optimum)
