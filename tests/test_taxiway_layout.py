"""Taxiway layouts: the shipped airports, the YAML loader's refusals, and the OSM GeoJSON importer."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

from fieldrl.domains.taxiway.env import LAYOUT_DIR
from fieldrl.simulators.airport.layout import LayoutError, build_surface, layout_from_dict, load_layout
from fieldrl.simulators.airport.osm import layout_from_geojson

TINY = {
    "name": "tiny",
    "runways": [{"id": "09/27", "use": "mixed"}],
    "nodes": [
        {"id": "A", "kind": "intersection", "x": 0, "y": 100},
        {"id": "B", "kind": "intersection", "x": 300, "y": 100},
        {"id": "E", "kind": "runway_entry", "runway": "09/27", "x": 0, "y": 0},
        {"id": "X", "kind": "runway_exit", "runway": "09/27", "x": 300, "y": 0},
        {"id": "S", "kind": "stand", "x": 300, "y": 220},
    ],
    "edges": [["A", "B"], ["A", "E"], ["X", "B"], ["B", "S"]],
}


def test_shipped_layouts_load_and_the_large_one_has_two_runways_and_crossings():
    small = load_layout(LAYOUT_DIR / "small.yaml")
    large = load_layout(LAYOUT_DIR / "large.yaml")
    assert len(small.runways) == 1 and len(small.kind_ids("stand")) == 9
    assert len(large.nodes) >= 150 and len(large.runways) == 2
    assert len(large.kind_ids("runway_crossing")) >= 3
    surface = build_surface(large, cell_m=60.0, separation=2)
    assert (surface.cell_runway >= 0).sum() > len(large.kind_ids("runway_crossing"))
    stand = large.index[large.kind_ids("stand")[0]]
    entry = large.index[large.kind_ids("runway_entry")[0]]
    assert 0 < surface.dist_to(entry)[stand] < 200


def test_a_valid_tiny_layout_loads():
    layout = layout_from_dict(copy.deepcopy(TINY))
    assert [n.kind for n in layout.nodes].count("stand") == 1
    assert layout.edges[0].length == pytest.approx(300.0)


def _broken(**change):
    data = copy.deepcopy(TINY)
    for path, value in change.items():
        section, index, field = path.split("__")
        data[section][int(index)][field] = value
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_broken(nodes__1__kind="taxiway"), r"nodes\[1\]\.kind: unknown node kind 'taxiway'"),
        (_broken(nodes__2__runway="18/36"), r"nodes\[2\]\.runway: unknown runway '18/36'"),
        (_broken(nodes__1__id="A"), r"nodes\[1\]\.id: duplicate node id 'A'"),
        (_broken(nodes__0__x="east"), r"nodes\[0\]\.x: 'east' is not a finite number"),
    ],
)
def test_loader_names_the_bad_field_and_value(data, message):
    with pytest.raises(LayoutError, match=message):
        layout_from_dict(data)


def test_loader_rejects_a_dangling_edge():
    data = copy.deepcopy(TINY)
    data["edges"].append(["B", "Q"])
    with pytest.raises(LayoutError, match=r"edges\[4\]\.to: dangling edge, unknown node 'Q'"):
        layout_from_dict(data)


def test_loader_rejects_an_unreachable_stand():
    data = copy.deepcopy(TINY)
    data["nodes"].append({"id": "S2", "kind": "stand", "x": 900, "y": 900})
    data["nodes"].append({"id": "C", "kind": "intersection", "x": 900, "y": 800})
    data["edges"].append(["C", "S2"])
    with pytest.raises(LayoutError, match="unreachable stand 'S2'"):
        layout_from_dict(data)


def test_loader_rejects_a_stand_reachable_only_through_another_stand():
    data = copy.deepcopy(TINY)
    data["nodes"].append({"id": "S2", "kind": "stand", "x": 300, "y": 400})
    data["edges"].append(["S", "S2"])
    with pytest.raises(LayoutError, match="unreachable stand 'S2'"):
        layout_from_dict(data)


def test_load_layout_reports_bad_yaml(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**TINY, "gates": []}))
    with pytest.raises(LayoutError, match=r"unknown field\(s\) \['gates'\]"):
        load_layout(path)


def _feature(aeroway, kind, coords, **props):
    return {
        "type": "Feature",
        "properties": {"aeroway": aeroway, **props},
        "geometry": {"type": kind, "coordinates": coords},
    }


def hand_made_geojson():
    """A runway along the equator, a parallel taxiway 150 m north, an end connector (line-up), a
    middle connector (exit), a taxiway crossing to a south apron, two holding points and three stands."""
    lat_t, lat_s = 0.00136, -0.00136  # about 150 m north / south
    return {
        "type": "FeatureCollection",
        "features": [
            _feature("runway", "LineString", [[0.0, 0.0], [0.027, 0.0]], ref="09/27"),
            _feature(
                "taxiway",
                "LineString",
                [[0.0, lat_t], [0.009, lat_t], [0.018, lat_t], [0.027, lat_t]],
                ref="A",
            ),
            _feature("taxiway", "LineString", [[0.0, lat_t], [0.0, 0.0007], [0.0, 0.0]], ref="A1"),
            _feature("taxiway", "LineString", [[0.009, 0.0], [0.009, lat_t]], ref="A2"),
            _feature(
                "taxiway",
                "LineString",
                [[0.018, lat_t], [0.018, 0.0008], [0.018, 0.0], [0.018, -0.0008], [0.018, lat_s]],
                ref="B",
            ),
            _feature("holding_position", "Point", [0.0, 0.0007]),
            _feature("holding_position", "Point", [0.01801, 0.00079]),
            _feature("parking_position", "Point", [0.009, 0.0025], ref="1"),
            _feature("parking_position", "LineString", [[0.027, lat_t + 0.0002], [0.027, 0.0026]], ref="2"),
            _feature("parking_position", "Point", [0.018, -0.0025], ref="3"),
            _feature("apron", "Polygon", [[[0, 0], [1, 0], [1, 1], [0, 0]]]),
        ],
    }


def test_geojson_importer_builds_a_valid_layout_with_every_node_kind():
    layout = layout_from_geojson(hand_made_geojson(), name="hand-made")
    kinds = [n.kind for n in layout.nodes]
    assert kinds.count("stand") == 3
    assert kinds.count("runway_entry") == 1
    assert kinds.count("runway_exit") == 1
    assert kinds.count("runway_crossing") == 1
    assert kinds.count("hold_short") == 2
    assert layout.runways[0]["id"] == "09/27"
    crossing = layout.node(layout.kind_ids("runway_crossing")[0])
    runway_y = layout.runways[0]["ends"][0][1]
    assert abs(crossing.y - runway_y) < 1.0 and crossing.runway == "09/27"
    a_lengths = sorted(e.length for e in layout.edges if {e.u, e.v} <= set(layout.kind_ids("intersection")))
    assert a_lengths[0] == pytest.approx(1001.9, rel=0.01)  # 0.009 degrees of longitude at the equator
    surface = build_surface(layout)
    assert surface.n_cells > len(layout.nodes)


def test_geojson_importer_refuses_an_extract_without_stands():
    data = hand_made_geojson()
    data["features"] = [f for f in data["features"] if f["properties"]["aeroway"] != "parking_position"]
    with pytest.raises(LayoutError, match="parking_position"):
        layout_from_geojson(data)


def test_an_imported_geojson_layout_runs_in_the_env(tmp_path):
    import json

    from fieldrl.domains.taxiway.env import parallel_env

    path = tmp_path / "airport.geojson"
    path.write_text(json.dumps(hand_made_geojson()))
    env = parallel_env(layout_file=str(path), movements_per_hour=60.0)
    env.reset(seed=0)
    steps = 0
    while env.agents and steps < 300:
        env.step({a: int(np.flatnonzero(env.action_mask(a))[-1]) for a in env.agents})
        steps += 1
    assert env.episode_info()["completed"] >= 1


def test_a_missing_layout_file_is_refused_with_its_name():
    from pydantic import ValidationError

    from fieldrl.domains.taxiway.params import TaxiwayParams

    with pytest.raises(ValidationError, match="no such file"):
        TaxiwayParams(layout_file="/nowhere/airport.yaml")


@pytest.mark.parametrize("kind", ["yaml", "geojson"])
def test_a_scenario_names_its_own_airport_file_relative_to_itself(tmp_path, monkeypatch, kind):
    import json

    from fieldrl import api

    study = tmp_path / "study"
    study.mkdir()
    if kind == "yaml":
        (study / "airport.yaml").write_text(yaml.safe_dump(TINY))
    else:
        (study / "airport.geojson").write_text(json.dumps(hand_made_geojson()))
    scenario = {
        "name": "my-airport",
        "domain": "taxiway",
        "params": {"layout_file": f"airport.{kind}", "movements_per_hour": 30.0, "horizon_min": 10.0},
        "policies": {"heuristics": [{"use": "fcfs"}]},
        "seeds": {"train": [0], "eval": [100]},
    }
    (study / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    monkeypatch.chdir(tmp_path)  # the path is relative to the scenario file, not to where fieldrl runs

    result = api.run(study / "scenario.yaml", out=tmp_path / "run", show_progress=False)
    snapshot = yaml.safe_load((result.run_dir / "scenario.yaml").read_text())
    assert snapshot["params"]["layout_file"] == str(study / f"airport.{kind}")  # found from anywhere
    assert set(result.results["policy"]) == {"fcfs"}
    monkeypatch.chdir(study.parent.parent)
    assert api.report(result.run_dir).is_file()  # re-reported later, from elsewhere
