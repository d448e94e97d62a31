"""Bounds before work (issue 39): scenario input that passed validation and then exhausted memory or
time now ends at validation with one line naming the field, before anything big is allocated.

1. a rail ``env_file`` pickle hiding a 4 GiB array (and other ways a small pickle asks for a lot);
2. a taxiway layout at ``x: 1e9``, a 1e12 m segment, too many cells or vertices, and a large OSM
   extract that once took minutes (all-pairs nearest-vertex and reachability searches);
3. a wealth portfolio with sigma = 1e-9, whose DP grid would need hundreds of GiB;
4. a PPO rollout or replay buffer too large for memory even with a one-number observation;
5. ``n_epochs: [1, 2]`` and other hyperparameters of a kind SB3 does not take.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from test_input_limits import _heuristic_only
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.errors import ScenarioError
from fieldrl.policies import memory_guard
from fieldrl.scenario import parse_scenario

cli = CliRunner()
#: what these tests let the machine look like: 8 GiB free (so no result depends on the machine)
FREE = 8 << 30


@pytest.fixture(autouse=True)
def _eight_gib_free(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_guard, "available_bytes", lambda: FREE)


def _refused(data: dict[str, Any], *pieces: str, within_s: float = 5.0, max_mib: float | None = None) -> str:
    """Validate ``data`` as ``fieldrl validate`` does (no build): one quick ``ScenarioError`` with ``pieces``.

    :param max_mib: if given, the most memory (traced) validation may allocate meanwhile.
    """
    start = time.monotonic()
    if max_mib is not None:
        tracemalloc.start()
    try:
        with pytest.raises(ScenarioError) as caught:
            parse_scenario(yaml.safe_dump(data, sort_keys=False), "s.yaml", build=False)
        peak = tracemalloc.get_traced_memory()[1] if max_mib is not None else 0
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < within_s
    assert peak < (max_mib or math.inf) * 2**20, f"allocated {peak / 2**20:.0f} MiB before refusing"
    message = str(caught.value)
    assert "\n" not in message
    for piece in pieces:
        assert piece in message, message
    return message


def _cli_refuses(data: dict[str, Any], tmp_path: Path, *pieces: str, command: str = "validate") -> None:
    """The CLI prints one ``error:`` message (no traceback), exits 2 and writes nothing."""
    file = tmp_path / "probe.yaml"
    file.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "run"
    args = [command, str(file)] + (["--out", str(out), "--quiet"] if command == "run" else [])
    result = cli.invoke(app, args)
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and flat.startswith("error:") and "Traceback" not in flat, flat
    for piece in pieces:
        assert piece in flat, flat
    assert not out.exists()


# ----------------------------------------------------------------------------- 1. rail env_file


class _Reduced:
    """An object that pickles as ``func(*args)`` (what a crafted file can ask the unpickler for)."""

    def __init__(self, func: Any, *args: Any, state: Any = None) -> None:
        self.func, self.args, self.state = func, args, state

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.func, self.args) if self.state is None else (self.func, self.args, self.state)


def _saved_rail_env(tmp_path: Path, extra: Any = None, name: str = "env.pkl") -> Path:
    """Level 0 (7 trains) saved by Flatland, with ``extra`` hidden in one of its dicts."""
    from flatland.envs.persistence import RailEnvPersister

    from fieldrl.domains.rail.levels import LEVELS, make_rail_env

    path = tmp_path / name
    RailEnvPersister.save(make_rail_env(LEVELS[0], 3), str(path))
    if extra is not None:
        env = pickle.loads(path.read_bytes())
        env["dev_obs_dict"] = {0: extra}
        path.write_bytes(pickle.dumps(env, protocol=4))
    return path


def _rail(path: Path) -> dict[str, Any]:
    return _heuristic_only("rail", {"env_file": str(path)}, {"use": "greedy-shortest-route"})


def _reconstruct() -> Any:
    """numpy's array unpickling function (imported here: only the rail tests use it)."""
    from numpy.core.multiarray import _reconstruct

    return _reconstruct


def _four_gib() -> _Reduced:
    return _Reduced(_reconstruct(), np.ndarray, (4 << 30,), b"b")


def test_a_rail_env_file_hiding_a_4_gib_array_is_refused_before_it_is_allocated(tmp_path: Path):
    """15 kB: a valid environment plus one numpy reconstruct of 4 GiB (once killed `run` at 24 GB)."""
    path = _saved_rail_env(tmp_path, _four_gib())
    assert path.stat().st_size < 20_000
    _refused(_rail(path), "env_file", "256 MiB", "shape (4294967296,)", max_mib=64)


def _shared_buffer() -> list[_Reduced]:
    """300 arrays set from one 1 MiB buffer (pickle writes it once): 1 MB asking for 300 MiB."""
    raw = b"\0" * (1 << 20)
    state = (1, (len(raw),), np.dtype("u1"), False, raw)
    return [_Reduced(_reconstruct(), np.ndarray, (0,), b"b", state=state) for _ in range(300)]


def _str_of_list() -> _Reduced:
    return _Reduced(str, ["x" * 60_000] * 5_000)  # 300 MB of text from 60 kB


def _huge_fraction() -> _Reduced:
    from fractions import Fraction

    return _Reduced(Fraction, "1e999999999")  # 10**999999999: hours of arithmetic


def _list_of_array() -> _Reduced:
    return _Reduced(list, _Reduced(np.ndarray, (10**7,)))  # 10 million numpy scalars


@pytest.mark.parametrize(
    ("make", "pieces"),
    [
        (_shared_buffer, ["256 MiB", "an array of shape (1048576,)"]),
        (_str_of_list, ["makes text of a list"]),
        (_huge_fraction, ["exponents up to 4300"]),
        (_list_of_array, ["256 MiB", "a list of 10,000,000 elements"]),
    ],
    ids=["shared-buffer", "str-of-list", "fraction-exponent", "list-of-array"],
)
def test_a_rail_env_file_asking_for_much_in_few_bytes_is_refused(
    tmp_path: Path, make: Any, pieces: list[str]
):
    path = _saved_rail_env(tmp_path, make())
    assert path.stat().st_size < 2 << 20
    _refused(_rail(path), "env_file", *pieces, max_mib=128)


def _flood(tmp_path: Path) -> Path:
    """2 MB of pickle opcodes making empty sets: a million objects (224 MB) without a single call."""
    path = tmp_path / "flood.pkl"
    path.write_bytes(b"\x80\x04]" + b"\x8fa" * (1 << 20) + b".")
    return path


def test_a_rail_env_file_of_a_million_objects_or_over_64_mib_is_refused(tmp_path: Path):
    _refused(_rail(_flood(tmp_path)), "env_file", "256 MiB", "too many objects", within_s=10.0)
    huge = tmp_path / "huge.pkl"
    with huge.open("wb") as f:
        f.truncate(65 << 20)  # sparse: nothing is written, the size is what counts
    _refused(_rail(huge), "env_file", "allowed: at most 64 MiB", "without distance maps")


def test_a_rail_env_file_larger_than_your_own_configuration_may_be_is_refused(tmp_path: Path):
    path = tmp_path / "big-grid.pkl"
    path.write_bytes(pickle.dumps({"grid": [[0] * 300] * 300, "agents": [0]}))
    _refused(_rail(path), "env_file", "a 300 x 300 grid; allowed: at most 200 cells a side")


def test_a_real_rail_env_file_is_read_within_the_budget(tmp_path: Path):
    from flatland.envs.persistence import RailEnvPersister

    from fieldrl.domains.rail.levels import ENV_FILE_BUDGET, LEVELS, _EnvUnpickler, make_rail_env

    path = tmp_path / "level4.pkl"
    RailEnvPersister.save(make_rail_env(LEVELS[4], 3), str(path), save_distance_maps=True)
    unpickler = _EnvUnpickler(path.read_bytes())
    env = unpickler.load()
    assert len(env["agents"]) == 80 and env["distance_map"].shape == (80, 30, 35, 4)
    assert unpickler.spent < ENV_FILE_BUDGET / 16  # 11 MB of 256 MiB


# ----------------------------------------------------------------------------- 2. taxiway layouts


def _small_layout() -> dict[str, Any]:
    from fieldrl.domains.taxiway.env import LAYOUT_DIR

    return yaml.safe_load((LAYOUT_DIR / "small.yaml").read_text())


def _taxiway(tmp_path: Path, layout: dict[str, Any] | str, suffix: str = ".yaml", **params: Any) -> dict:
    file = tmp_path / f"airport{suffix}"
    file.write_text(layout if isinstance(layout, str) else yaml.safe_dump(layout))
    return _heuristic_only("taxiway", {"layout_file": str(file), **params}, {"use": "fcfs"})


def _far_node(layout: dict[str, Any]) -> None:
    layout["nodes"][0]["x"] = 1e9


def _long_edge(layout: dict[str, Any]) -> None:
    first = layout["edges"][0]
    u, v = (first["from"], first["to"]) if isinstance(first, dict) else first
    layout["edges"][0] = {"from": u, "to": v, "length": 1e12}


def _busy_node(layout: dict[str, Any]) -> None:
    hub = layout["nodes"][0]
    for i in range(101):
        layout["nodes"].append({"id": f"gate{i}", "kind": "stand", "x": hub["x"] + i, "y": hub["y"] + 50})
        layout["edges"].append({"from": hub["id"], "to": f"gate{i}"})


@pytest.mark.parametrize(
    ("change", "pieces"),
    [
        (_far_node, ["at x = 1e+09", "allowed: at most 50,000 m"]),
        (_long_edge, ["edges[0].length: 1e+12 m", "allowed: at most 50,000 m"]),
        (_busy_node, ["103 segments; allowed: at most 100"]),
    ],
    ids=["node-at-1e9", "segment-of-1e12-m", "101-stands-at-one-node"],
)
def test_a_taxiway_layout_beyond_its_limits_is_refused_before_cells_are_cut(tmp_path, change, pieces):
    """``x: 1e9`` once grew `validate` to 16 GB (1e8: 20 s); a 1e12 m segment, to whatever it could."""
    layout = _small_layout()
    change(layout)
    _refused(_taxiway(tmp_path, layout), "layout_file", "not a usable layout", *pieces, max_mib=64)


def test_a_taxiway_surface_of_more_than_a_million_cells_is_refused_unbuilt(tmp_path: Path):
    """225 segments of 45 km are within the span limits but cut into 1.01 million 10 m cells."""
    n = 225
    nodes = [{"id": "S", "kind": "stand", "x": 0.0, "y": -10.0}]
    nodes += [{"id": f"n{i}", "kind": "intersection", "x": float(i), "y": 0.0} for i in range(n + 1)]
    nodes.append({"id": "E", "kind": "runway_entry", "runway": "R", "x": float(n), "y": 10.0})
    edges = [{"from": "S", "to": "n0"}, {"from": f"n{n}", "to": "E"}]
    edges += [{"from": f"n{i}", "to": f"n{i + 1}", "length": 45_000.0} for i in range(n)]
    layout = {"runways": [{"id": "R"}], "nodes": nodes, "edges": edges}
    data = _taxiway(tmp_path, layout, cell_m=10.0, dt_s=1.0)
    _refused(data, "cell_m: 10 m cells", "1,012,503 cells; allowed: at most 1,000,000", max_mib=64)


def _feature(aeroway: str, kind: str, coords: Any, **props: Any) -> dict[str, Any]:
    geometry = {"type": kind, "coordinates": coords}
    return {"type": "Feature", "properties": {"aeroway": aeroway, **props}, "geometry": geometry}


def _airport(step_m: float, stands_per_lane: int, runways: int = 4, lanes: int = 6) -> dict[str, Any]:
    """A synthetic hub: parallel runways with taxiways on both sides, crossing connectors with holding
    points, links between runway groups, and apron lanes lined with stands (GeoJSON, lon/lat)."""
    length = 4000.0

    def ll(x: float, y: float) -> list[float]:
        return [round(10.0 + x / 85_280.0, 7), round(40.0 + y / 110_540.0, 7)]

    def line(points: list[tuple[float, float]], ref: str) -> dict[str, Any]:
        return _feature("taxiway", "LineString", [ll(x, y) for x, y in points], ref=ref)

    along = [i * step_m for i in range(int(length / step_m) + 1)]
    feats = []
    for r in range(runways):
        y = r * 1500.0
        feats.append(_feature("runway", "LineString", [ll(0, y), ll(length, y)], ref=f"{r:02d}L/{r:02d}R"))
        feats += [line([(x, y + side) for x in along], f"T{r}{side}") for side in (-200.0, 200.0)]
        for k, x in enumerate(np.arange(200.0, length, 200.0)):
            feats.append(line([(x, y - 200.0 + j * 20.0) for j in range(21)], f"C{r}-{k}"))
            feats += [_feature("holding_position", "Point", ll(x, y + d)) for d in (-80.0, 80.0)]
        if r:
            feats += [
                line([(x, y - 1300.0), (x, y - 750.0), (x, y - 200.0)], f"V{r}") for x in (1000.0, 3000.0)
            ]
        feats += [line([(x, y - 200.0), (x, y - 100.0), (x, y)], f"E{r}") for x in (0.0, length)]
    top = (runways - 1) * 1500.0 + 200.0
    for lane in range(lanes):
        ly, previous = top + 300.0 + lane * 150.0, (top if lane == 0 else top + 150.0 + lane * 150.0)
        feats.append(line([(x, ly) for x in along], f"L{lane}"))
        feats += [line([(x, previous), (x, (previous + ly) / 2), (x, ly)], f"J{lane}") for x in (0.0, length)]
        for j in range(stands_per_lane):
            spot = ll((j + 0.5) * length / stands_per_lane, ly + 40.0)
            feats.append(_feature("parking_position", "Point", spot, ref=f"{lane}-{j}"))
    return {"type": "FeatureCollection", "features": feats}


def test_a_large_osm_airport_validates_in_seconds_not_minutes(tmp_path: Path):
    """A 1 MB extract (17,000 vertices, 3,840 stands): 56 s with all-pairs searches, now about 1 s."""
    text = json.dumps(_airport(step_m=5.0, stands_per_lane=640))
    assert len(text) > 900_000
    data = _taxiway(tmp_path, text, suffix=".geojson")
    start = time.monotonic()
    parse_scenario(yaml.safe_dump(data), "s.yaml", build=False)
    assert time.monotonic() - start < 10.0


def test_an_osm_extract_of_too_many_vertices_is_refused_unsearched(tmp_path: Path):
    taxiway = [[10.0 + i * 1e-7, 40.0] for i in range(200_001)]
    extract = {
        "type": "FeatureCollection",
        "features": [
            _feature("taxiway", "LineString", taxiway),
            _feature("runway", "LineString", [[10.0, 40.001], [10.02, 40.001]]),
            _feature("parking_position", "Point", [10.01, 39.999]),
        ],
    }
    data = _taxiway(tmp_path, json.dumps(extract), suffix=".geojson")
    _refused(data, "layout_file", "200,004 coordinates", "allowed: at most 200,000")


def test_the_limits_leave_the_shipped_layouts_and_their_surfaces_unchanged():
    from fieldrl.domains.taxiway.env import load_params_layout
    from fieldrl.simulators.airport.layout import build_surface

    large = build_surface(load_params_layout("large"), 10.0, 10)
    assert (large.n_cells, large.n_pos, len(large.ball[0])) == (2340, 4523, 19)


# ----------------------------------------------------------------------------- 3. wealth frontier


def _wealth(sigma: float) -> dict[str, Any]:
    frontier = {"portfolios": [[0.05, sigma], [0.08, 0.15]]}
    return _heuristic_only("wealth", {"benchmark": 4, "frontier": frontier}, {"use": "fixed-portfolio"})


def test_a_wealth_portfolio_with_sigma_1e_9_is_refused_naming_the_smallest_sigma_that_fits():
    """sigma = 1e-9 once passed validation; every episode then failed on a 48+ GiB DP grid."""
    message = _refused(_wealth(1e-9), "frontier.portfolios", "sigma_min = 1e-09", "8.0 GiB", max_mib=64)
    smallest = float(message.split("every sigma >= ")[1].split()[0])
    from fieldrl.domains.wealth.params import WealthParams, dp_memory_problem

    fits = WealthParams(**_wealth(smallest * 1.01)["params"]).problem()
    assert dp_memory_problem(fits, FREE) is None  # the sigma named does fit
    parse_scenario(yaml.safe_dump(_wealth(0.01)), "s.yaml", build=False)


def test_the_dp_heuristic_s_own_grid_is_judged_against_memory_too():
    """A sigma the converged DP can hold may still be too fine for the dp heuristic's exact rows."""
    frontier = {"portfolios": [[0.05, 0.005], [0.08, 0.15]]}
    dense = {"use": "dp", "settings": {"grid_density": 10.0}}
    data = _heuristic_only("wealth", {"benchmark": 4, "frontier": frontier}, dense)
    _refused(data, "policies.heuristics[0].settings", "grid_density 10.0", "the dp heuristic", max_mib=64)
    data["policies"]["heuristics"][0]["settings"]["grid_density"] = 1.0
    parse_scenario(yaml.safe_dump(data), "s.yaml", build=False)


def test_the_dp_memory_estimate_bounds_what_the_dp_allocates():
    from fieldrl.simulators.gbwm import dp
    from fieldrl.simulators.gbwm.engine import Frontier, benchmark_problem

    problem = benchmark_problem(4, frontier=Frontier.from_portfolios([(0.05, 0.01), (0.08, 0.15)]))
    assert dp.grid_points(problem, 8.0) == len(dp.make_grid(problem, 8.0))
    dp.solve(problem, 1.0, rows="interpolated")  # scipy's imports are not the DP's memory
    tracemalloc.start()
    dp.solve(problem, 8.0, rows="interpolated")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert 0.5 < peak / dp.solve_bytes(problem, 8.0, rows="interpolated") <= 1.0


# ----------------------------------------------------------------------------- 4. buffers at validation


def _learned(scenario_data: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    scenario_data["policies"]["learned"] = [entry]
    scenario_data.pop("budgets", None)
    return scenario_data


@pytest.mark.parametrize(
    ("entry", "pieces"),
    [
        (
            {"algorithm": "ppo", "train_steps": 10**9, "n_envs": 1, "hyperparameters": {"n_steps": 10**9}},
            ["hyperparameters.n_steps = 1000000000", "rollout buffer would need 29.8 GiB even with"],
        ),
        (
            {
                "algorithm": "ppo",
                "train_steps": 10**9,
                "n_envs": 4096,
                "hyperparameters": {"n_steps": 200_000},
            },
            ["hyperparameters.n_steps = 200000", "rollout buffer would need 24.4 GiB", "at most 32,768"],
        ),
        (
            {
                "algorithm": "sac",
                "train_steps": 10_000,
                "n_envs": 1,
                "hyperparameters": {"buffer_size": "5e9"},
            },
            ["hyperparameters.buffer_size = 5000000000", "replay buffer would need 111.8 GiB"],
        ),
    ],
    ids=["ppo-n_steps", "ppo-n_envs-x-n_steps", "sac-buffer_size"],
)
def test_a_buffer_that_cannot_fit_is_refused_without_building(scenario_data, entry, pieces):
    entry = {"name": "L", **entry}
    _refused(_learned(scenario_data, entry), *pieces, "allowed: at most", within_s=2.0, max_mib=64)


def test_a_buffer_that_fits_the_lower_bound_still_passes_plain_validation(scenario_data):
    entry = {
        "algorithm": "sac",
        "name": "SAC",
        "train_steps": 10_000,
        "hyperparameters": {"buffer_size": "1e6"},
    }
    parse_scenario(yaml.safe_dump(_learned(scenario_data, entry)), "s.yaml", build=False)


# ----------------------------------------------------------------------------- 5. hyperparameter kinds


@pytest.mark.parametrize(
    ("algorithm", "key", "value", "allowed"),
    [
        ("ppo", "n_epochs", [1, 2], "must be a whole number, not a list"),
        ("ppo", "n_epochs", 2.5, "must be a whole number, not a float"),
        ("ppo", "learning_rate", "lin_3e-4", "must be a number, not a str"),
        ("ppo", "normalize_advantage", "yes", "must be true or false"),
        ("ppo", "ent_coef", "auto", "must be a number, not a str"),
        ("ppo", "policy_kwargs", [64, 64], "must be a mapping or null, not a list"),
        ("ppo", "rollout_buffer_class", "DictRolloutBuffer", "must be null (a class cannot be named"),
        ("ppo", "batch_size", None, "must be a whole number, not null"),
        ("sac", "train_freq", [4, "steps"], "[n, step] / [n, episode]"),
        ("sac", "ent_coef", "automatic", "a number, 'auto' or 'auto_<number>'"),
    ],
)
def test_a_hyperparameter_of_a_kind_sb3_does_not_take_is_refused(
    scenario_data, algorithm, key, value, allowed
):
    """``n_epochs: [1, 2]`` passed `validate --build`; `run` wrote its folder and died mid-training."""
    entry = {"algorithm": algorithm, "name": "L", "train_steps": 4096, "hyperparameters": {key: value}}
    _refused(_learned(scenario_data, entry), f"policies.learned[0].hyperparameters.{key} = ", allowed)


@pytest.mark.parametrize(
    ("algorithm", "key", "value"),
    [
        ("ppo", "n_steps", 64.0),
        ("ppo", "learning_rate", "3e-4"),
        ("ppo", "clip_range_vf", None),
        ("maskable-ppo", "batch_size", None),
        ("sac", "ent_coef", "auto_0.1"),
        ("sac", "train_freq", [1, "episode"]),
        ("sac", "buffer_size", "1e5"),
    ],
)
def test_what_sb3_takes_is_accepted_and_whole_numbers_reach_it_as_ints(scenario_data, algorithm, key, value):
    from fieldrl.policies.registry import build_kwargs

    entry = {"algorithm": algorithm, "name": "L", "train_steps": 10**6, "hyperparameters": {key: value}}
    parse_scenario(yaml.safe_dump(_learned(scenario_data, entry)), "s.yaml", build=False)
    built = build_kwargs({key: value}, None)[key]
    if key in ("n_steps", "buffer_size"):
        assert type(built) is int


def _kind_of(annotation: Any, default: Any) -> str:
    """The kind (signatures.KINDS) an SB3 constructor annotation allows in YAML."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    optional = "?" if "None" in text else ""
    if text == "_empty":  # fieldrl's own term_weights: a tuple of floats by default
        assert isinstance(default, tuple)
        return "floats"
    for marker, kind in [
        ("tuple[int, str]", "train_freq"),
        ("str | float", "auto|float"),
        ("type[", "class"),
        ("dict[", "mapping"),
        ("ActionNoise", "noise"),
        ("bool", "bool"),
        ("float", "float"),
        ("int", "int"),
    ]:
        if marker in text:
            return kind + optional
    raise AssertionError(f"unknown annotation {text}")


def test_the_written_kinds_match_the_algorithm_classes_annotations():
    import inspect

    from fieldrl.policies.registry import ALGORITHMS, RESERVED
    from fieldrl.policies.signatures import parameter_kind

    for name, cls in ALGORITHMS.items():
        for key, parameter in inspect.signature(cls.__init__).parameters.items():
            if key == "self" or key in RESERVED:
                continue
            assert parameter_kind(name, key) == _kind_of(parameter.annotation, parameter.default), (name, key)


# ----------------------------------------------------------------------------- the CLI, once per case


def test_the_cli_refuses_each_case_in_one_line_with_exit_2(scenario_data, tmp_path: Path):
    layout = _small_layout()
    _far_node(layout)
    _cli_refuses(_taxiway(tmp_path, layout), tmp_path, "params", "allowed: at most 50,000 m")
    _cli_refuses(_wealth(1e-9), tmp_path, "params", "frontier.portfolios")
    ppo = {"algorithm": "ppo", "name": "L", "train_steps": 10**9, "n_envs": 1, "hyperparameters": {}}
    ppo["hyperparameters"]["n_steps"] = 10**9
    _cli_refuses(_learned(copy.deepcopy(scenario_data), ppo), tmp_path, "hyperparameters.n_steps")
    listed = {"algorithm": "ppo", "name": "L", "train_steps": 256, "n_envs": 4, "hyperparameters": {}}
    listed["hyperparameters"] = {"n_steps": 64, "n_epochs": [1, 2]}
    bad = _learned(copy.deepcopy(scenario_data), listed)
    _cli_refuses(bad, tmp_path, "hyperparameters.n_epochs = [1, 2]", command="run")


@pytest.mark.needs("rail")
def test_the_cli_refuses_the_4_gib_rail_env_file_in_one_line(tmp_path: Path):
    path = _saved_rail_env(tmp_path, _four_gib())
    _cli_refuses(_rail(path), tmp_path, "env_file", "256 MiB")
