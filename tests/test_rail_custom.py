"""Rail beyond the five levels: your own Flatland configuration, a saved Flatland environment, and
Flatland's own ShortestPathPolicy beside fieldrl's renamed greedy dispatcher."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import yaml
from flatland.envs.persistence import RailEnvPersister
from flatland.envs.rail_env_policies import ShortestPathPolicy
from flatland.envs.step_utils.states import TrainState
from pydantic import ValidationError
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.domains.rail import DOMAIN
from fieldrl.domains.rail.env import RailParallelEnv
from fieldrl.domains.rail.levels import LEVELS, make_rail_env
from fieldrl.domains.rail.params import RailParams
from fieldrl.evaluation.runner import run_episodes

OWN = {
    "trains": 12,
    "width": 40,
    "height": 36,
    "cities": 3,
    "max_rails_between_cities": 1,
    "max_rail_pairs_in_city": 1,
    "speed_profile": [{"speed": 1.0, "share": 0.5}, {"speed": 0.5, "share": 0.5}],
    "malfunction_interval": 0,
    "step_limit": 300,
}


def _run(name: str, params: RailParams, seeds: list[int]) -> dict[str, np.ndarray]:
    spec = DOMAIN.heuristics[name]
    kpis, _ = run_episodes(DOMAIN, params, spec.build(spec.settings_model(), params, name), seeds)
    return kpis


def _play(env: RailParallelEnv, seed: int) -> list[np.ndarray]:
    """Every train departs and follows the track; returns the malfunction counters of every step."""
    env.reset(seed=seed)
    seen = []
    while env.agents:
        env.step({a: 1 if env.pending[env.index[a]] == 1 else 5 for a in env.agents})
        seen.append(np.array([a.malfunction_handler.malfunction_down_counter for a in env.fl.agents]))
    return seen


def test_your_own_configuration_builds_what_it_says() -> None:
    params = RailParams(flatland=OWN)
    level = params.configuration()
    assert (level.trains, level.width, level.height, level.cities, level.step_limit) == (12, 40, 36, 3, 300)
    env = DOMAIN.make_eval_envs(params, [4]).envs[0]
    counters = _play(env, 4)
    fl = env.fl
    assert fl.get_num_agents() == 12 and (fl.width, fl.height) == (40, 36) and env.max_steps == 300
    assert {float(a.speed_counter.max_speed) for a in fl.agents} <= {1.0, 0.5}
    assert not np.any(counters)  # malfunction_interval 0: no breakdowns
    assert len(env.possible_agents) == 12


def test_fields_not_given_come_from_the_level_preset() -> None:
    level = RailParams(level=2, flatland={"trains": 5, "malfunction_max": 60}).configuration()
    assert (level.trains, level.width, level.height, level.cities) == (5, 30, 30, 3)
    assert (level.malfunction_min, level.malfunction_max, level.malfunction_interval) == (20, 60, 1800)
    assert RailParams(level=3).configuration() == LEVELS[3]  # the presets are unchanged


IMPOSSIBLE = [
    ({"flatland": {"width": 15, "height": 15}}, "Flatland cannot build this configuration"),
    ({"flatland": {"speed_profile": [{"speed": 1.0, "share": 0.6}]}}, "shares must sum to 1"),
    ({"flatland": {"malfunction_min": 80}}, "malfunction_min (80) must not exceed"),
    ({"flatland": {"trains": 0}}, "greater than or equal to 1"),
    ({"flatland": {"trains": 3}, "curriculum": [0, 1]}, "curriculum samples the built-in levels"),
    ({"flatland": {"trains": 3}, "env_file": "x.pkl"}, "give env_file or flatland"),
]


@pytest.mark.parametrize("params,message", IMPOSSIBLE, ids=[m[:24] for _, m in IMPOSSIBLE])
def test_impossible_configurations_are_refused(params: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RailParams(**params)


def test_an_impossible_configuration_is_one_line_from_the_cli(tmp_path: Path) -> None:
    scenario = {
        "name": "mine",
        "domain": "rail",
        "params": {"flatland": {"width": 16, "height": 16, "cities": 4}},
        "policies": {"heuristics": [{"use": "greedy-shortest-route"}]},
        "seeds": {"train": [0], "eval": {"start": 10, "count": 1}},
    }
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(scenario))
    result = CliRunner().invoke(app, ["validate", "--build", str(file)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "Traceback" not in flat, flat
    assert "params.flatland" in flat or "params" in flat
    assert "Flatland cannot build this configuration" in flat


def test_a_saved_flatland_environment_is_loaded_and_seeds_draw_only_the_malfunctions(tmp_path: Path) -> None:
    original = make_rail_env(LEVELS[0], 3)
    path = tmp_path / "mine.pkl"
    RailEnvPersister.save(original, str(path))
    params = RailParams(env_file=str(path))
    env = DOMAIN.make_eval_envs(params, [1]).envs[0]
    runs = {}
    for seed in (1, 2, 1):
        counters = _play(env, seed)
        assert np.array_equal(env.fl.rail.grid, original.rail.grid)
        assert [a.initial_configuration for a in env.fl.agents] == [
            a.initial_configuration for a in original.agents
        ]
        runs.setdefault(seed, []).append(np.concatenate(counters) if counters else np.zeros(0))
    assert np.array_equal(runs[1][0], runs[1][1])  # same seed, same malfunctions
    assert len(env.possible_agents) == 7


def test_an_environment_file_that_could_run_code_is_refused(tmp_path: Path) -> None:
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    bad = tmp_path / "evil.pkl"
    bad.write_bytes(pickle.dumps({"grid": [[0]], "agents": [Evil()]}))
    with pytest.raises(ValidationError, match="env_file .*system, which is not part of a saved Flatland"):
        RailParams(env_file=str(bad))
    assert not (tmp_path / "pwned").exists()
    other = tmp_path / "env.mpk"
    other.write_bytes(b"\x80")
    with pytest.raises(ValidationError, match=r"expected a \.pkl"):
        RailParams(env_file=str(other))
    with pytest.raises(ValidationError, match="does not exist"):
        RailParams(env_file=str(tmp_path / "none.pkl"))


def _flatland_own_loop(params: RailParams, seed: int) -> float:
    """% of trains Flatland's ShortestPathPolicy brings home when it drives the raw RailEnv itself."""
    fl = make_rail_env(params.configuration(), seed)
    policy = ShortestPathPolicy()
    handles = list(range(fl.get_num_agents()))
    done = False
    while not done:
        _, _, dones, _ = fl.step(policy.act_many(handles, [fl] * len(handles)))
        done = dones["__all__"]
    return 100.0 * np.mean([a.state == TrainState.DONE for a in fl.agents])


def test_flatland_shortest_path_heuristic_is_flatlands_own_policy() -> None:
    params = RailParams(level=0, flatland={"malfunction_interval": 0})
    seeds = [20, 21, 22]
    ours = _run("flatland-shortest-path", params, seeds)["arrived"]
    assert ours.tolist() == pytest.approx([_flatland_own_loop(params, s) for s in seeds])
    greedy = _run("greedy-shortest-route", params, seeds)["arrived"]
    assert _run("shortest-path", params, seeds)["arrived"].tolist() == greedy.tolist()  # the old name


def test_a_relative_env_file_is_found_beside_the_scenario_from_any_folder(
    tmp_path: Path, monkeypatch
) -> None:
    """Like cohort_file and layout_file: a relative env_file starts at the scenario file's folder."""
    (tmp_path / "study").mkdir()
    RailEnvPersister.save(make_rail_env(LEVELS[0], 3), str(tmp_path / "study" / "level0.pkl"))
    scenario = {
        "name": "mine",
        "domain": "rail",
        "params": {"env_file": "level0.pkl"},
        "policies": {"heuristics": [{"use": "greedy-shortest-route"}]},
        "seeds": {"train": [0], "eval": {"start": 10, "count": 1}},
    }
    file = tmp_path / "study" / "s.yaml"
    file.write_text(yaml.safe_dump(scenario))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    result = CliRunner().invoke(app, ["validate", str(file)])
    assert result.exit_code == 0, result.output
