"""Rail stress axes (issue 40): breakdown interval and number of trains, moved away from training
while the trained policies, their observations and actions stay as they were."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import fieldrl
from fieldrl import api
from fieldrl.domains.base import SIMULATOR_CHECKS
from fieldrl.domains.rail import DOMAIN
from fieldrl.domains.rail.domain import make_env
from fieldrl.domains.rail.params import RailParams
from fieldrl.evaluation.stress import STRESS_RESULTS
from fieldrl.scenario import Scenario, builtin_scenarios, load_scenario, parse_scenario, stress_points

AXES = DOMAIN.stress_axes
RAIL_SCENARIOS = [ref for ref in builtin_scenarios() if ref.startswith("rail/")]
ORDER = ["variant", "policy", "train_seed", "eval_seed", "episode", "metric"]


def _entries(scenario: Scenario, variant: str) -> list[str | None]:
    """None (the setting's own params) and every learned entry that runs in ``variant``."""
    return [None, *(e.label for e in scenario.policies.learned if e.runs_in(variant))]


def test_the_rail_axes_are_declared():
    assert sorted(AXES) == ["malfunction_interval", "trains"]
    for axis in AXES.values():
        assert list(axis.points) == sorted(set(axis.points)) and 4 <= len(axis.points) <= 6
        assert axis.low <= axis.points[0] and axis.points[-1] <= axis.high


@pytest.mark.parametrize("ref", RAIL_SCENARIOS)
def test_every_axis_at_the_trained_value_leaves_the_params_as_they_were(ref):
    """In every setting (stressed or not) and for every learned entry's own params: the point the run
    trained at is the scenario's world, field for field, so it replays the plain evaluation."""
    scenario = load_scenario(ref, build=False)
    assert scenario.stress is not None, f"{ref} has no stress section"
    for variant in scenario.variant_names:
        for entry in _entries(scenario, variant):
            raw = scenario.policy_params(variant, entry)
            params = RailParams.model_validate(raw)
            for name, axis in AXES.items():
                trained = axis.trained(params)
                assert trained == getattr(params.configuration(), name), (ref, variant, name)
                again = axis.apply(raw, trained)
                assert again == raw and RailParams.model_validate(again) == params, (
                    ref,
                    variant,
                    entry,
                    name,
                )


def _points(scenario: Scenario, name: str) -> list[float]:
    """The domain's default points of axis ``name`` and the scenario's own, if it names any."""
    own = [list(a.points or []) for a in scenario.stress.axes if a.axis == name]
    return sorted({*AXES[name].points, *(own[0] if own else [])})


def _validated(raw: dict, build: bool) -> RailParams:
    """``raw`` as params; ``build``: Flatland builds the network too, as ``validate --build`` does
    (once per setting: a learned entry's own params change the policy's design, not the network)."""
    token = SIMULATOR_CHECKS.set(build)
    try:
        return RailParams.model_validate(raw)
    finally:
        SIMULATOR_CHECKS.reset(token)


def _spaces(params: RailParams) -> tuple:
    env = make_env(params)
    agent = env.possible_agents[0]
    return env.observation_space(agent), env.action_space(agent), env


@pytest.mark.parametrize("ref", RAIL_SCENARIOS)
def test_at_every_point_the_world_moves_and_the_spaces_stay(ref):
    """Each default (and scenario) point validates (Flatland builds it), moves exactly the field it
    names, and leaves every train's observation and action spaces as each trained policy knew them."""
    scenario = load_scenario(ref, build=False)
    for variant in scenario.stressed_variants:
        for entry in _entries(scenario, variant):
            raw = scenario.policy_params(variant, entry)
            plain = RailParams.model_validate(raw)
            obs_space, act_space, _ = _spaces(plain)
            for name in AXES:
                for value in _points(scenario, name):
                    world = _validated(AXES[name].apply(raw, value), build=entry is None)
                    assert AXES[name].trained(world) == value
                    moved = world.configuration()
                    kept = {"trains", "malfunction_interval"} - {name}
                    assert all(getattr(moved, k) == getattr(plain.configuration(), k) for k in kept)
                    assert world.model_dump(exclude={"flatland", "curriculum"}) == plain.model_dump(
                        exclude={"flatland", "curriculum"}
                    ), "a controller's own setting moved"
                    obs, act, env = _spaces(world)
                    assert (obs, act) == (obs_space, act_space), (ref, variant, entry, name, value)
                    if entry is None and name == "trains":  # what the env really hands each train
                        observations, _ = env.reset(seed=10000)
                        assert len(env.possible_agents) == value
                        assert all(o.shape == obs_space.shape for o in observations.values())


def test_the_trained_point_of_a_curriculum_setting_is_left_alone_and_others_drop_the_curriculum():
    """rail/levels trains levels 1-4 on a curriculum (training only): away from the trained point the
    stressed world evaluates the setting's level without it (the params model forbids it beside
    flatland); evaluation never used it."""
    raw = {"level": 2, "curriculum": [0, 1, 2], "shield": True}
    assert AXES["trains"].apply(raw, 20) is raw
    world = AXES["trains"].apply(raw, 30)
    assert world == {"level": 2, "shield": True, "flatland": {"trains": 30}}
    mine = {"level": 1, "flatland": {"trains": 12, "step_limit": 300}}
    assert AXES["malfunction_interval"].apply(mine, 100)["flatland"] == {
        "trains": 12,
        "step_limit": 300,
        "malfunction_interval": 100,
    }


def _scenario(**params: object) -> Scenario:
    data = {
        "name": "rail-stress-check",
        "domain": "rail",
        "params": {"level": 0, **params},
        "policies": {"heuristics": [{"use": "priority-reroute", "name": "priority reroute"}]},
        "seeds": {"train": [0], "eval": {"start": 10000, "count": 2}},
    }
    return parse_scenario(yaml.safe_dump(data), "s.yaml", build=False)


@pytest.mark.parametrize(
    ("name", "points", "says"),
    [
        ("trains", [4.5, 7], "valid integer"),
        ("trains", [0, 7], "range"),
        ("malfunction_interval", [5, 540], "range"),
    ],
)
def test_a_point_the_world_cannot_take_is_refused_at_validation(name, points, says):
    _, problem = stress_points(_scenario(), DOMAIN, name, points)
    assert problem is not None and problem[0] == "points[0]" and says in problem[2], problem


@pytest.mark.parametrize("name", sorted(AXES))
def test_a_saved_environment_fixes_the_world_so_only_its_own_point_is_allowed(tmp_path, name):
    from flatland.envs.persistence import RailEnvPersister

    from fieldrl.domains.rail.levels import LEVELS, make_rail_env

    path = tmp_path / "net.pkl"
    RailEnvPersister.save(make_rail_env(LEVELS[0], 3), str(path))
    scenario = _scenario(env_file=str(path))
    params = RailParams.model_validate(scenario.variant_params("default"))
    trained = AXES[name].trained(params)
    assert trained == {"trains": 7.0, "malfunction_interval": 540.0}[name]
    assert stress_points(scenario, DOMAIN, name, [trained, trained * 2])[1] is not None
    assert (
        "give env_file or flatland, not both"
        in stress_points(scenario, DOMAIN, name, [trained * 2, 1e6])[1][2]
    )
    assert AXES[name].apply(scenario.variant_params("default"), trained) == scenario.variant_params("default")


# ----------------------------------------------------------------------------- end to end

TINY: dict = {
    "name": "rail-tiny-stress",
    "domain": "rail",
    # level 0 cut to 60 steps (of about 200): seconds per episode, and still trains to dispatch
    "params": {"level": 0, "shield": True, "flatland": {"step_limit": 60}},
    "policies": {
        "heuristics": [{"use": "priority-reroute", "name": "priority reroute"}],
        "learned": [
            {
                "algorithm": "maskable-ppo",
                "name": "PPO",
                "train_steps": 224,
                "n_envs": 1,
                "hyperparameters": {"n_steps": 16, "batch_size": 112, "n_epochs": 1},  # 7 slots
            }
        ],
    },
    "seeds": {"train": [0], "eval": {"start": 10000, "count": 2}},
}


@pytest.fixture(scope="module")
def stressed(tmp_path_factory) -> tuple[Path, pd.DataFrame, pd.DataFrame]:
    base = tmp_path_factory.mktemp("rail-stress")
    (base / "s.yaml").write_text(yaml.safe_dump(TINY))
    run_dir = fieldrl.train(base / "s.yaml", out=base / "run", show_progress=False)
    api.evaluate(run_dir, show_progress=False)
    api.stress(run_dir, [("trains", [7, 10]), ("malfunction_interval", [20, 540])], show_progress=False)
    plain = pd.read_parquet(run_dir / "results.parquet").sort_values(ORDER).reset_index(drop=True)
    return run_dir, plain, pd.read_parquet(run_dir / STRESS_RESULTS)


def _at(results: pd.DataFrame, axis: str, point: float) -> pd.DataFrame:
    here = results[(results["axis"] == axis) & (results["point"] == point)]
    return here.drop(columns=["axis", "point"]).sort_values(ORDER).reset_index(drop=True)


@pytest.mark.parametrize(("axis", "trained"), [("trains", 7.0), ("malfunction_interval", 540.0)])
def test_the_trained_point_reproduces_the_plain_evaluation_exactly(stressed, axis, trained):
    _, plain, results = stressed
    assert _at(results, axis, trained).equals(plain)


def _values(frame: pd.DataFrame, policy: str, metric: str) -> pd.Series:
    rows = frame[(frame["policy"] == policy) & (frame["metric"] == metric)]
    return rows["value"].reset_index(drop=True)


def test_ten_trains_are_ten_trains_for_every_policy_the_trained_network_included(stressed):
    _, plain, results = stressed
    moved = _at(results, "trains", 10.0)
    assert len(moved) == len(plain)  # every policy played every held-out case: nothing failed
    for policy in ("priority reroute", "PPO"):
        for metric in ("arrived", "deadlocked", "cancelled"):  # % of 10 trains: whole tenths
            share = _values(moved, policy, metric) / 10.0
            assert (share == share.round()).all(), (policy, metric, share.tolist())
        assert not _values(moved, policy, "normalized_reward").equals(
            _values(plain, policy, "normalized_reward")
        )


def test_more_frequent_breakdowns_change_the_episodes(stressed):
    """A breakdown every 20 steps instead of 540 moves the dispatcher's result (in 60-step episodes 135
    changed nothing on these two networks, measured; the barely trained PPO may keep its trains at
    their origins, where a breakdown costs nothing, so only that it played every case is checked)."""
    _, plain, results = stressed
    moved = _at(results, "malfunction_interval", 20.0)
    assert len(moved) == len(plain)
    dispatcher = "priority reroute"
    assert not _values(moved, dispatcher, "normalized_reward").equals(
        _values(plain, dispatcher, "normalized_reward")
    )


def test_more_or_fewer_trains_run_on_the_same_network():
    """The trains axis moves the trains, not the rail: a seed draws the same network at 4, 7 and 14."""
    from fieldrl.domains.rail.levels import make_rail_env

    for seed in (10000, 10001):
        grids = [
            make_rail_env(
                RailParams.model_validate(AXES["trains"].apply({}, n)).configuration(), seed
            ).rail.grid
            for n in (4, 7, 14)
        ]
        assert all(np.array_equal(grids[0], g) for g in grids[1:]), seed
