"""Taxiway stress axes (traffic, share of departures, separation minimum): only the world moves, the
trained point is the plain evaluation again, and the trained networks and the shield still run."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from test_taxiway_planning import run as play

import fieldrl
from fieldrl import api
from fieldrl.domains import get_domain
from fieldrl.domains.taxiway.env import traffic_config
from fieldrl.domains.taxiway.heuristics import Prioritized, ShortestPath
from fieldrl.domains.taxiway.params import TaxiwayParams
from fieldrl.domains.taxiway.shield import ShieldedPolicy
from fieldrl.evaluation.stress import STRESS_RESULTS
from fieldrl.policies.base import Policy
from fieldrl.scenario import Scenario, load_scenario

DOMAIN = get_domain("taxiway")
BUILT_IN = sorted(
    f"taxiway/{p.name.removesuffix('.yaml')}"
    for p in (resources.files("fieldrl") / "scenarios" / "taxiway").iterdir()
    if p.name.endswith(".yaml")
)
ORDER = ["variant", "policy", "train_seed", "eval_seed", "episode", "metric"]
#: a point away from the trained value on each axis (the trained values are 1, 0.5 and 2 cells)
AWAY = {"traffic": 2.0, "departure_share": 0.8, "separation": 3.0}


def test_the_domain_declares_the_axes_the_docs_describe():
    assert list(DOMAIN.stress_axes) == ["traffic", "departure_share", "separation"]
    for axis in DOMAIN.stress_axes.values():
        assert list(axis.points) == sorted(axis.points) and 4 <= len(axis.points) <= 6
        assert axis.low <= axis.points[0] and axis.points[-1] <= axis.high


def _settings(ref: str) -> list[tuple[Scenario, str, dict]]:
    """Every setting of a built-in scenario (not only the stressed ones: a `stress: variants` added later
    is covered too), with its raw params."""
    scenario = load_scenario(ref, build=False)
    return [(scenario, v, scenario.variant_params(v)) for v in scenario.variant_names]


@pytest.mark.parametrize("ref", BUILT_IN)
def test_every_axis_at_the_trained_value_leaves_the_params_as_they_were(ref):
    for scenario, variant, raw in _settings(ref):
        params = TaxiwayParams.model_validate(raw)
        for name, axis in DOMAIN.stress_axes.items():
            trained = axis.trained(params)
            assert trained in axis.points, (ref, variant, name)  # the map shows the trained point
            world = TaxiwayParams.model_validate(axis.apply(raw, trained))
            assert world == params, (ref, variant, name)
            assert traffic_config(world) == traffic_config(params)
        for entry in scenario.policies.learned:  # what a learned policy runs with: the same world
            own = scenario.policy_params(variant, entry.label)
            assert DOMAIN.stress_axes["traffic"].apply(own, 1.0) == own


def _points(scenario: Scenario, name: str) -> list[float]:
    """The axis's default points and those the scenario's stress section asks for."""
    asked = [a.points or [] for a in (scenario.stress.axes if scenario.stress else []) if a.axis == name]
    return sorted({*DOMAIN.stress_axes[name].points, *(p for points in asked for p in points)})


@pytest.mark.parametrize("ref", BUILT_IN)
def test_at_every_point_the_world_moves_and_the_spaces_stay(ref):
    scenario = load_scenario(ref, build=False)
    assert scenario.stress is not None, f"{ref} has no stress section"
    for variant in scenario.stressed_variants:
        raw = scenario.variant_params(variant)
        plain = TaxiwayParams.model_validate(raw)
        env = DOMAIN.make_parallel_env(plain)
        for name, axis in DOMAIN.stress_axes.items():
            for value in _points(scenario, name):
                world = TaxiwayParams.model_validate(axis.apply(raw, value))
                moved = DOMAIN.make_parallel_env(world)
                for agent in ("ac0", moved.possible_agents[-1]):
                    assert moved.observation_space(agent) == env.observation_space("ac0"), (name, value)
                    assert moved.action_space(agent) == env.action_space("ac0"), (name, value)
                assert moved.max_slots == env.max_slots and moved.params.weights == plain.weights
                cfg = traffic_config(world)
                expected = {
                    "traffic": (cfg.movements_per_hour, plain.rate() * value),
                    "departure_share": (cfg.departure_share, value),
                    "separation": (moved.surface.separation, value),
                }[name]
                assert expected[0] == pytest.approx(expected[1]), (name, value)


def test_the_low_density_at_1_75_times_is_the_medium_density_traffic():
    """taxiway/densities stresses its low setting up to 1.75 x: the medium setting's 70 movements/h."""
    scenario = load_scenario("taxiway/densities", build=False)
    low = DOMAIN.stress_axes["traffic"].apply(scenario.variant_params("low"), 1.75)
    medium = TaxiwayParams.model_validate(scenario.variant_params("medium"))
    assert traffic_config(TaxiwayParams.model_validate(low)) == traffic_config(medium)


class _HoldEveryone(Policy):
    """A learned policy at its worst: it never moves anyone (the shield must unstick them)."""

    name = "hold"

    def reset(self, n_envs: int) -> None:
        pass

    def act(self, obs, episode_start):
        return np.zeros(np.asarray(obs).shape[:2], dtype=np.int64)


@pytest.mark.parametrize("name", ["traffic", "departure_share", "separation"])
def test_the_shield_runs_at_every_default_point(name):
    """The runtime shield (around the learned policy in the built-in scenarios) at every default point,
    on the small airport: around uncontrolled shortest paths it vets every decision and leaves no
    conflict where every plan was found; around a policy that never moves it moves the aircraft."""
    axis = DOMAIN.stress_axes[name]
    raw = {"layout": "small", "density": "low", "max_slots": 8, "horizon_min": 10.0, "drain_min": 5.0}
    for value in axis.points:
        params = TaxiwayParams.model_validate(axis.apply(raw, value))
        (env,) = play(ShieldedPolicy("sh", ShortestPath("sp"), Prioritized("pp"), patience=6), params, [7])
        info = env.episode_info()
        assert env.shield_decisions > 0 and np.isfinite(info["shield_override_pct"]), (name, value)
        if env.plan_failures == 0:
            assert info["conflicts"] == 0, (name, value, env.sim.conflict_counts)
        (env,) = play(ShieldedPolicy("sh", _HoldEveryone(), Prioritized("pp"), patience=6), params, [7])
        assert env.shield_unstuck > 0 and env.episode_info()["shield_unstuck_per_100"] > 0, (name, value)


# ----------------------------------------------------------------------------- replaying a tiny run

TINY = {
    "name": "taxiway-stress-tiny",
    "domain": "taxiway",
    "params": {"layout": "small", "density": "low", "max_slots": 8, "horizon_min": 15.0, "drain_min": 10.0},
    "policies": {
        "heuristics": [
            {"use": "prioritized", "name": "prioritized planning"},
            {"use": "shortest-path", "name": "shortest path"},
        ],
        "learned": [
            {  # no shield here: a barely trained policy holds everyone, and the shield's planning to
                # unstick them would take minutes (the shield is checked at every point above)
                "algorithm": "maskable-ppo",
                "name": "MaskablePPO",
                "train_steps": 256,
                "n_envs": 1,
                "hyperparameters": {"n_steps": 32, "batch_size": 64, "n_epochs": 1},
            }
        ],
    },
    "seeds": {"train": [0], "eval": {"start": 1000, "count": 3}},
}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """Two heuristics and a barely trained MaskablePPO, trained, evaluated and stressed on every axis
    (CBS is left out: its time limit makes its results depend on the machine's load)."""
    base = tmp_path_factory.mktemp("taxiway-stress")
    (base / "s.yaml").write_text(yaml.safe_dump(TINY))
    run_dir = fieldrl.train(base / "s.yaml", out=base / "run", show_progress=False)
    api.evaluate(run_dir, show_progress=False)
    axes = [(name, [trained, AWAY[name]]) for name, trained in _trained().items()]
    api.stress(run_dir, axes, show_progress=False)
    return run_dir


def _trained() -> dict[str, float]:
    params = TaxiwayParams.model_validate(TINY["params"])
    return {name: axis.trained(params) for name, axis in DOMAIN.stress_axes.items()}


def _steady(frame: pd.DataFrame) -> pd.DataFrame:
    """Results without the wall-clock metrics (decision and planning times differ from run to run)."""
    kept = frame[~frame["metric"].isin(DOMAIN.wall_clock_metrics())]
    return kept.sort_values(ORDER).reset_index(drop=True)


@pytest.mark.parametrize("name", ["traffic", "departure_share", "separation"])
def test_the_trained_point_replays_the_plain_evaluation_and_the_other_point_differs(tiny_run, name):
    plain = _steady(pd.read_parquet(tiny_run / "results.parquet"))
    stressed = pd.read_parquet(tiny_run / STRESS_RESULTS)
    stressed = stressed[stressed["axis"] == name]
    trained, away = _trained()[name], AWAY[name]
    at_trained = _steady(stressed[stressed["point"] == trained].drop(columns=["axis", "point"]))
    assert at_trained.equals(plain)
    moved = _steady(stressed[stressed["point"] == away].drop(columns=["axis", "point"]))
    assert len(moved) == len(plain)
    for policy in plain["policy"].unique():  # every policy, the learned one too, met another world
        mine = moved["policy"] == policy
        same = np.array_equal(moved[mine]["value"], plain[plain["policy"] == policy]["value"], equal_nan=True)
        assert not same, policy
