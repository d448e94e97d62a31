"""Traffic's stress axes (issue 40): vehicle and pedestrian demand moved away from the scenario's own,
the standard timings (Webster) kept at the run's own demand; nothing retrained."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import shipped_untuned

import fieldrl
from fieldrl import api
from fieldrl.domains import get_domain
from fieldrl.errors import ScenarioError
from fieldrl.evaluation.stress import STRESS_RESULTS
from fieldrl.scenario import Scenario, load_scenario, parse_scenario

DOMAIN = get_domain("traffic")
BUILT_IN = sorted(
    p.name.removesuffix(".yaml")
    for p in (resources.files("fieldrl") / "scenarios" / "traffic").iterdir()
    if p.name.endswith(".yaml")
)
#: built-in scenarios whose demand is generated from periods (the others bring their own routes)
GENERATED = ["arterial-surge", "grid-pedestrians", "quick"]
ORDER = ["variant", "policy", "train_seed", "eval_seed", "episode", "metric"]


def _settings(scenario: Scenario) -> list[dict]:
    """Raw params of every policy in every stressed setting (a learned entry's own params over them)."""
    return [
        scenario.policy_params(variant, label)
        for variant in scenario.stressed_variants
        for label, _ in scenario.policies.by_kind
    ]


def _spaces(params) -> list:
    env = DOMAIN.make_parallel_env(params)
    return [(env.observation_space(a), env.action_space(a)) for a in env.possible_agents]


def test_the_built_in_scenarios_are_the_ones_checked_here():
    assert BUILT_IN == ["arterial-surge", "grid-pedestrians", "quick", "resco-cologne1"]


@pytest.mark.parametrize("name", BUILT_IN)
def test_the_trained_point_leaves_every_stressed_setting_exactly_as_it_was(name):
    scenario = load_scenario(f"traffic/{name}", build=False)
    for raw in _settings(scenario):
        own = DOMAIN.params_model.model_validate(raw)
        for axis_name, axis in DOMAIN.stress_axes.items():
            trained = axis.trained(own)
            assert trained == 1.0 and trained in axis.points, axis_name
            assert DOMAIN.params_model.model_validate(axis.apply(raw, trained)) == own, axis_name


@pytest.mark.parametrize("name", GENERATED)
def test_every_default_point_validates_and_keeps_every_policy_s_spaces(name):
    scenario = load_scenario(f"traffic/{name}", build=False)
    for raw in {yaml.safe_dump(r): r for r in _settings(scenario)}.values():  # each distinct setting once
        plain = _spaces(DOMAIN.params_model.model_validate(raw))
        for axis_name, axis in DOMAIN.stress_axes.items():
            for point in axis.points:
                stressed = DOMAIN.params_model.model_validate(axis.apply(raw, point))
                assert _spaces(stressed) == plain, (axis_name, point)


@pytest.mark.parametrize(("axis", "moved", "kept"), [
    ("demand", ("vehicles_main", "vehicles_side"), "pedestrians"),
    ("pedestrians", ("pedestrians",), "vehicles_main"),
])  # fmt: skip
def test_an_axis_scales_its_own_rates_in_every_period_and_no_others(axis, moved, kept):
    raw = load_scenario("traffic/arterial-surge", build=False).variant_params("default")
    world = DOMAIN.params_model.model_validate(DOMAIN.stress_axes[axis].apply(raw, 1.5))
    own = DOMAIN.params_model.model_validate(raw)
    for before, after in zip(own.periods, world.periods, strict=True):
        assert all(getattr(after, r) == 1.5 * getattr(before, r) for r in moved)
        assert getattr(after, kept) == getattr(before, kept) and after.duration_s == before.duration_s
    assert world.timing_periods == own.periods


def test_webster_s_timing_stays_the_run_s_own_when_demand_moves():
    """Webster's program and advice are computed from the demand: without the run's own periods kept,
    the stressed world would re-time them for the stressed demand (a controller's setting moving)."""
    raw = {**load_scenario("traffic/quick", build=False).variant_params("default"), "advice": True}
    own = DOMAIN.params_model.model_validate(raw)
    world = DOMAIN.params_model.model_validate(DOMAIN.stress_axes["demand"].apply(raw, 2.0))
    plain, stressed = DOMAIN.make_parallel_env(own), DOMAIN.make_parallel_env(world)
    assert stressed._webster_file() == plain._webster_file()
    assert stressed._webster == plain._webster  # the advice a learned policy sees
    retimed = DOMAIN.make_parallel_env(world.model_copy(update={"timing_periods": None}))
    assert retimed._webster_file().read_text() != plain._webster_file().read_text()


@pytest.mark.parametrize("axis", ["demand", "pedestrians"])
def test_a_network_with_its_own_routes_refuses_the_demand_axes_at_validation(axis):
    data = shipped_untuned("traffic/resco-cologne1")
    data["stress"] = {"axes": [{"axis": axis, "points": [1.0, 1.5]}]}
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(yaml.safe_dump(data), "s.yaml", build=False)
    assert caught.value.field == "stress.axes[0].axis", str(caught.value)
    assert "brings its own routes" in str(caught.value)
    generated = load_scenario("traffic/quick", build=False).variant_params("default")
    assert DOMAIN.stress_axes[axis].problem(generated) is None


def test_every_built_in_scenario_with_generated_demand_has_a_stress_section_that_validates():
    for name in BUILT_IN:
        stress = load_scenario(f"traffic/{name}", build=False).stress  # its points checked on loading
        assert (stress is not None) == (name in GENERATED), name


# ----------------------------------------------------------------------------- a tiny run

TINY = {
    "name": "tiny-traffic",
    "domain": "traffic",
    "params": {
        "network": "single",
        "periods": [
            {
                "name": "peak",
                "duration_s": 180,
                "vehicles_main": 500,
                "vehicles_side": 250,
                "pedestrians": 300,
            },
        ],
    },
    "policies": {
        "heuristics": [
            {"use": "webster", "name": "Webster"},
            {"use": "max-pressure", "name": "max-pressure"},
        ],
        "learned": [  # barely trained: here to be loaded into stressed envs (with Webster's advice)
            {
                "algorithm": "maskable-ppo",
                "name": "PPO + advice",
                "params": {"advice": True},
                "train_steps": 32,
                "n_envs": 1,
                "hyperparameters": {"n_steps": 32, "batch_size": 32, "n_epochs": 1},
            }
        ],
    },
    "seeds": {"train": [0], "eval": {"start": 1000, "count": 2}},
}


@pytest.fixture(scope="module")
def stressed_run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("traffic-stress")
    (base / "s.yaml").write_text(yaml.safe_dump(TINY))
    run_dir = fieldrl.run(base / "s.yaml", out=base / "run", show_progress=False).run_dir
    api.stress(run_dir, [("demand", [1.0, 1.5]), ("pedestrians", [1.0, 3.0])], show_progress=False)
    return run_dir


@pytest.mark.parametrize(("axis", "other"), [("demand", 1.5), ("pedestrians", 3.0)])
def test_the_trained_point_replays_the_plain_evaluation_and_the_other_point_moves(stressed_run, axis, other):
    plain = pd.read_parquet(stressed_run / "results.parquet").sort_values(ORDER).reset_index(drop=True)
    stressed = pd.read_parquet(stressed_run / STRESS_RESULTS)
    stressed = stressed[stressed["axis"] == axis]
    at_trained = stressed[stressed["point"] == 1.0].drop(columns=["axis", "point"])
    assert at_trained.sort_values(ORDER).reset_index(drop=True).equals(plain)
    moved = stressed[stressed["point"] == other].drop(columns=["axis", "point"])
    moved = moved.sort_values(ORDER).reset_index(drop=True)
    assert moved[ORDER].equals(plain[ORDER])  # the same policies, held-out days and KPIs
    for policy in ("Webster", "max-pressure", "PPO + advice"):
        mine = (moved["policy"] == policy) & (moved["metric"] == "person_delay_mean")
        assert not (moved.loc[mine, "value"] == plain.loc[mine, "value"]).all(), policy
