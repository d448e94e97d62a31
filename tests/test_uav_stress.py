"""The uav domain's stress axes (computing load, number of vehicles): the trained point is the run's own
world, every default point keeps the policies' spaces, and a stress test replays the plain evaluation
exactly where it trained and moves it elsewhere."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

import fieldrl
from fieldrl import api
from fieldrl.domains import get_domain
from fieldrl.evaluation.stress import STRESS_RESULTS
from fieldrl.scenario import Scenario, builtin_scenarios, load_scenario, stress_points

DOMAIN = get_domain("uav")
BUILTIN = [ref for ref in builtin_scenarios() if ref.startswith("uav/")]
ORDER = ["variant", "policy", "train_seed", "eval_seed", "episode", "metric"]
#: solver times measured on this machine (SOCP, LP): they vary from run to run, as in any determinism check
WALL_CLOCK = {k.name for k in DOMAIN.kpis if k.wall_clock}


def _scenario(ref: str) -> Scenario:
    return load_scenario(ref, build=False)


def _policies(scenario: Scenario) -> list[str | None]:
    """Every params a policy of ``scenario`` can run with: the setting's, and each learned entry's."""
    return [None, *(entry.label for entry in scenario.policies.learned)]


def test_the_builtin_scenarios_are_all_stressed_on_the_domain_s_axes():
    assert {"uav/quick", "uav/dense-city"} <= set(BUILTIN)
    assert set(DOMAIN.stress_axes) == {"load", "vehicles"}
    for ref in BUILTIN:
        scenario = _scenario(ref)
        assert scenario.stress is not None, ref
        for wanted in scenario.stress.axes:
            assert stress_points(scenario, DOMAIN, wanted.axis, wanted.points)[1] is None, (ref, wanted)


@pytest.mark.parametrize("ref", BUILTIN)
def test_each_axis_at_the_trained_value_leaves_the_params_as_they_were(ref):
    scenario = _scenario(ref)
    model = DOMAIN.params_model
    for variant in scenario.variant_names:
        for policy in _policies(scenario):
            raw = scenario.policy_params(variant, policy)
            params = model.model_validate(raw)
            for name, axis in DOMAIN.stress_axes.items():
                trained = axis.trained(params)
                assert model.model_validate(axis.apply(raw, trained)) == params, (variant, policy, name)
                moved = axis.apply(raw, axis.points[0] if axis.points[0] != trained else axis.points[-1])
                assert model.model_validate(moved) != params, (variant, policy, name)
    assert scenario.stress is not None
    for variant in scenario.stressed_variants:  # the map marks the trained value among the tested ones
        params = model.model_validate(scenario.variant_params(variant))
        for wanted in scenario.stress.axes:
            trained = DOMAIN.stress_axes[wanted.axis].trained(params)
            assert trained in (wanted.points or DOMAIN.stress_axes[wanted.axis].points), (variant, wanted)


@pytest.mark.parametrize("ref", BUILTIN)
def test_each_axis_moves_its_own_world_field_and_nothing_else(ref):
    scenario = _scenario(ref)
    model = DOMAIN.params_model
    fields = {"load": "load", "vehicles": "n_vehicles"}
    for variant in scenario.variant_names:
        for policy in _policies(scenario):
            raw = scenario.policy_params(variant, policy)
            plain = model.model_validate(raw).model_dump()
            for name, axis in DOMAIN.stress_axes.items():
                for value in axis.points:
                    moved = model.model_validate(axis.apply(raw, value)).model_dump()
                    assert moved[fields[name]] == value, (variant, policy, name, value)
                    changed = {k for k in plain if moved[k] != plain[k]}
                    assert changed <= {fields[name]}, (variant, policy, name, value, changed)


def _spaces(params) -> list[tuple]:
    """Every agent's observation and action space, and the shape of its first observation."""
    env = DOMAIN.make_parallel_env(params)
    observations, _ = env.reset(seed=7)
    return [
        (env.observation_space(a), env.action_space(a), observations[a].shape, observations[a].dtype)
        for a in env.possible_agents
    ]


@pytest.mark.parametrize("ref", BUILTIN)
def test_every_default_and_scenario_point_keeps_every_policy_s_spaces(ref):
    scenario = _scenario(ref)
    model = DOMAIN.params_model
    wanted = {a.axis: a.points or [] for a in scenario.stress.axes} if scenario.stress else {}
    for variant in scenario.variant_names:
        for policy in _policies(scenario):
            raw = scenario.policy_params(variant, policy)
            plain = _spaces(model.model_validate(raw))
            for name, axis in DOMAIN.stress_axes.items():
                for value in sorted({*axis.points, *wanted.get(name, [])}):
                    assert axis.low <= value <= axis.high
                    stressed = model.model_validate(axis.apply(raw, value))
                    assert _spaces(stressed) == plain, (variant, policy, name, value)


def test_a_vehicle_count_that_is_not_whole_is_refused_in_one_line_not_rounded():
    scenario = _scenario("uav/quick")
    _, problem = stress_points(scenario, DOMAIN, "vehicles", [5.0, 7.5])
    assert problem is not None and problem[0] == "points[1]" and problem[1] == 7.5
    assert "n_vehicles" in problem[2] and "\n" not in problem[2], problem
    _, problem = stress_points(scenario, DOMAIN, "load", [2.0, 11.0])
    assert problem is not None and "0.1 to 10" in problem[2], problem


# ----------------------------------------------------------------------------- a tiny run, replayed

TINY = {
    "name": "uav-tiny-stress",
    "domain": "uav",
    "params": {"n_uavs": 2, "n_vehicles": 6, "episode_slots": 4, "load": 2.0},
    "policies": {
        "heuristics": [
            {"use": "all-local"},
            {"use": "greedy", "name": "greedy rate"},
        ],
        "learned": [
            {
                "algorithm": "ppo",
                "name": "PPO",
                "train_steps": 64,
                "n_envs": 1,
                "hyperparameters": {"n_steps": 32, "batch_size": 32, "n_epochs": 1},
            }
        ],
    },
    "seeds": {"train": [0], "eval": {"start": 100, "count": 3}},
}


@pytest.fixture(scope="module")
def stressed(tmp_path_factory) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A tiny trained and evaluated uav run (PPO and two rules), stressed on both axes: its plain and
    stressed results."""
    base = tmp_path_factory.mktemp("uav-stress")
    (base / "s.yaml").write_text(yaml.safe_dump(TINY))
    run_dir = fieldrl.train(base / "s.yaml", out=base / "run", show_progress=False)
    api.evaluate(run_dir, show_progress=False)
    api.stress(run_dir, [("load", [2.0, 3.0]), ("vehicles", [6, 12])], show_progress=False)
    plain = pd.read_parquet(Path(run_dir) / "results.parquet")
    return plain.sort_values(ORDER).reset_index(drop=True), pd.read_parquet(Path(run_dir) / STRESS_RESULTS)


def _at(results: pd.DataFrame, axis: str, point: float) -> pd.DataFrame:
    here = results[(results["axis"] == axis) & (results["point"] == point)]
    return here.drop(columns=["axis", "point"]).sort_values(ORDER).reset_index(drop=True)


def _simulated(results: pd.DataFrame) -> pd.DataFrame:
    return results[~results["metric"].isin(WALL_CLOCK)].reset_index(drop=True)


@pytest.mark.parametrize(("axis", "trained"), [("load", 2.0), ("vehicles", 6.0)])
def test_the_trained_point_reproduces_the_plain_evaluation_exactly(stressed, axis, trained):
    plain, results = stressed
    at_trained = _at(results, axis, trained)
    assert at_trained[ORDER].equals(plain[ORDER])  # every policy, held-out case and KPI, in order
    assert _simulated(at_trained).equals(_simulated(plain))
    assert set(plain["policy"]) == {"PPO", "all-local", "greedy rate"}
    assert sorted(WALL_CLOCK) == ["lp_ms", "socp_ms"]  # only solver times are left out of the comparison


def _success(results: pd.DataFrame, policy: str) -> pd.Series:
    rows = results[(results["policy"] == policy) & (results["metric"] == "success_rate")]
    return rows.set_index("eval_seed")["value"]


def test_a_higher_load_fails_more_tasks_on_the_same_traffic(stressed):
    plain, results = stressed
    heavier = _at(results, "load", 3.0)
    assert len(heavier) == len(plain) and heavier[ORDER[:-1]].equals(plain[ORDER[:-1]])
    # the same vehicles and tasks, each 1.5x the size: on its own CPU no vehicle does better, some worse
    local, local_plain = _success(heavier, "all-local"), _success(plain, "all-local")
    assert (local <= local_plain).all() and local.sum() < local_plain.sum()
    assert not _success(heavier, "PPO").equals(_success(plain, "PPO"))  # the trained net, in another world


def test_more_vehicles_change_every_policy_s_episodes(stressed):
    plain, results = stressed
    busier = _at(results, "vehicles", 12.0)
    assert len(busier) == len(plain)
    for policy in ("all-local", "greedy rate", "PPO"):
        cost = busier[(busier["policy"] == policy) & (busier["metric"] == "cost")]["value"]
        cost_plain = plain[(plain["policy"] == policy) & (plain["metric"] == "cost")]["value"]
        assert cost.sum() > cost_plain.sum(), policy  # twice the tasks a slot cost more in all
