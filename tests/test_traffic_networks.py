"""A traffic scenario can name any SUMO network: RESCO by name, your own .sumocfg, or an OSM extract."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.domains.traffic.env import TrafficEnv, net_file_for
from fieldrl.domains.traffic.networks import NetworkOptions, build_network, convert_osm
from fieldrl.domains.traffic.params import PeriodModel, TrafficParams

runner = CliRunner()
SHORT = [PeriodModel(name="am", duration_s=120, vehicles_main=500, vehicles_side=250, pedestrians=400)]

# Two signalised junctions on a four-lane street in Cologne (OSM tags them highway=traffic_signals)
OSM = """<?xml version="1.0" encoding="UTF-8"?>
<osm version="0.6" generator="fieldrl-test">
  <bounds minlat="50.9390" minlon="6.9480" maxlat="50.9430" maxlon="6.9560"/>
  <node id="1" lat="50.9410" lon="6.9480"/>
  <node id="2" lat="50.9410" lon="6.9510"><tag k="highway" v="traffic_signals"/></node>
  <node id="3" lat="50.9410" lon="6.9540"><tag k="highway" v="traffic_signals"/></node>
  <node id="4" lat="50.9410" lon="6.9560"/>
  <node id="5" lat="50.9430" lon="6.9510"/>
  <node id="6" lat="50.9390" lon="6.9510"/>
  <node id="7" lat="50.9430" lon="6.9540"/>
  <node id="8" lat="50.9390" lon="6.9540"/>
  <way id="10"><nd ref="1"/><nd ref="2"/><nd ref="3"/><nd ref="4"/>
    <tag k="highway" v="secondary"/><tag k="lanes" v="4"/><tag k="maxspeed" v="50"/></way>
  <way id="11"><nd ref="5"/><nd ref="2"/><nd ref="6"/>
    <tag k="highway" v="tertiary"/><tag k="lanes" v="2"/><tag k="maxspeed" v="30"/></way>
  <way id="12"><nd ref="7"/><nd ref="3"/><nd ref="8"/>
    <tag k="highway" v="residential"/><tag k="maxspeed" v="30"/></way>
</osm>
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FIELDRL_TRAFFIC_DIR", str(tmp_path_factory.getbasetemp() / "traffic-cache"))


def play(params: TrafficParams, steps: int, seed: int = 1) -> dict[str, float]:
    env = TrafficEnv(params)
    rng = np.random.default_rng(seed)
    try:
        env.reset(seed=seed)
        for _ in range(steps):
            if not env.agents:
                break
            env.step({a: int(rng.integers(env.n_stages)) for a in env.agents})
        return env.episode_info()
    finally:
        env.close()


def test_a_resco_network_by_name_takes_network_demand_and_times_from_its_own_sumocfg() -> None:
    params = TrafficParams(resco="cologne3", all_red_s=0)
    assert params.begin_s == 25200 and [p.duration_s for p in params.periods] == [3600]
    source = params.network_source()
    assert source is not None and source.net_file.name == "cologne3.net.xml"
    assert [r.name for r in source.route_files] == ["cologne3.rou.xml"]
    short = TrafficParams(resco="ingolstadt1", periods=SHORT)  # periods given: they set the length
    assert short.begin_s == 57600 and short.duration_s == 120
    info = play(short, 24)
    assert info["time_s"] == 120 and info["throughput"] > 0


def test_your_own_sumocfg_names_network_routes_and_times(tmp_path: Path) -> None:
    net = build_network(NetworkOptions(layout="single", lanes=3))
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "town.net.xml").write_bytes(net.read_bytes())
    (tmp_path / "town.rou.xml").write_text(
        '<routes><flow id="f" begin="100" end="400" probability="0.2" from="left0A0" to="A0right0"/></routes>'
    )
    cfg = tmp_path / "town.sumocfg"
    cfg.write_text(
        "<configuration><input>"
        '<net-file value="net/town.net.xml"/><route-files value="town.rou.xml"/>'
        '</input><time><begin value="100"/><end value="400"/></time></configuration>'
    )
    params = TrafficParams(sumocfg=str(cfg))
    assert params.begin_s == 100 and params.duration_s == 300
    assert net_file_for(params) == tmp_path / "net" / "town.net.xml"
    info = play(params, 60)
    assert info["time_s"] == 300 and info["vehicle_delay_mean"] >= 0 and info["throughput"] > 0
    assert TrafficParams(sumocfg=str(cfg), begin_s=150).begin_s == 150  # given here: takes precedence


def test_an_openstreetmap_extract_is_converted_by_netconvert_and_runs_with_generated_demand(
    tmp_path: Path,
) -> None:
    osm = tmp_path / "cologne.osm"
    osm.write_text(OSM)
    params = TrafficParams(osm_file=str(osm), periods=SHORT)
    net = net_file_for(params)
    assert net.parent.name == "osm" and net.read_text().count("<tlLogic") == 2
    before = net.stat().st_mtime_ns
    assert convert_osm(osm, params.all_red_s) == net and net.stat().st_mtime_ns == before  # cached by content
    assert convert_osm(osm, 0) != net  # the all-red is part of the programs netconvert builds
    env = TrafficEnv(params)
    assert len(env.possible_agents) == 2 and any(lay.crossings for lay in env.layouts)
    info = play(params, 24)
    assert info["throughput"] > 0 and info["vehicle_delay_mean"] > 0


BAD = [
    ({"resco": "cologne2"}, ["resco", "cologne1", "ingolstadt21"]),
    ({"resco": "cologne1", "net_file": "sumo-rl:RESCO/cologne1/cologne1.net.xml"}, ["give one of"]),
    ({"resco": "cologne1", "route_file": "sumo-rl:RESCO/cologne1/cologne1.rou.xml"}, ["route_file"]),
    ({"net_file": "sumo-rl:../../../../../../etc/hostname"}, ["net_file", "does not exist"]),
]


@pytest.mark.parametrize(
    "params,expected", BAD, ids=["unknown RESCO", "two sources", "routes twice", "escape"]
)
def test_a_bad_network_source_is_one_line_naming_the_field(
    tmp_path: Path, params: dict, expected: list[str]
) -> None:
    scenario = {
        "name": "mine",
        "domain": "traffic",
        "params": params,
        "policies": {"heuristics": [{"use": "fixed-time"}]},
        "seeds": {"train": [0], "eval": {"start": 10, "count": 1}},
    }
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(scenario))
    result = runner.invoke(app, ["validate", str(file)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "Traceback" not in flat and len(result.output.strip().splitlines()) <= 3
    for piece in expected:
        assert piece in flat, flat


def test_osm_files_and_configs_sumo_cannot_use_are_refused(tmp_path: Path) -> None:
    not_osm = tmp_path / "a.osm"
    not_osm.write_text("<net/>")
    with pytest.raises(ValidationError, match="osm_file.*root element is <net>, expected <osm>"):
        TrafficParams(osm_file=str(not_osm))
    no_signals = tmp_path / "b.osm"
    no_signals.write_text(OSM.replace('<tag k="highway" v="traffic_signals"/>', ""))
    with pytest.raises(ValidationError, match="osm_file .*no traffic lights"):
        TrafficParams(osm_file=str(no_signals))
    cfg = tmp_path / "c.sumocfg"
    (tmp_path / "n.net.xml").write_bytes(build_network(NetworkOptions(layout="single")).read_bytes())
    cfg.write_text(
        '<configuration><input><net-file value="n.net.xml"/><route-files value="x.rou.xml"/></input>'
        "</configuration>"
    )
    with pytest.raises(ValidationError, match="sumocfg .*route-files lists .*x.rou.xml.*does not exist"):
        TrafficParams(sumocfg=str(cfg))
    cfg.write_text("<configuration><input/></configuration>")
    with pytest.raises(ValidationError, match="sumocfg .*names no net-file"):
        TrafficParams(sumocfg=str(cfg))


def test_queues_count_the_road_before_a_stub_approach_lane_but_never_past_another_signal() -> None:
    """ingolstadt7's clustered junction starts an approach 0.92 m before its stop line: the queue
    max-pressure and longest-queue-first see includes the 44 m road feeding it."""
    from fieldrl.domains.traffic.env import probe_layouts

    layouts, _ = probe_layouts(net_file_for(TrafficParams(resco="ingolstadt7")), False)
    stub = next(lay for lay in layouts if "10425609#1_1" in lay.in_lanes)
    lanes, sharing = stub.upstream["10425609#1_1"]
    assert any(u.startswith("10425609#0_") for u in lanes) and sharing == 3  # three lanes share the road
    generated, _ = probe_layouts(net_file_for(TrafficParams(network="grid")), True)
    assert all(not lay.upstream for lay in generated)  # 200 m blocks between signals: nothing to add


def test_a_relative_net_file_is_found_beside_the_scenario_from_any_folder(
    tmp_path: Path, monkeypatch
) -> None:
    """Like cohort_file and layout_file: a relative net_file starts at the scenario file's folder
    (validated with --build, which starts SUMO on it)."""
    import sumo_rl

    source = Path(sumo_rl.__file__).parent / "nets" / "single-intersection" / "single-intersection.net.xml"
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "single.net.xml").write_bytes(source.read_bytes())
    scenario = {
        "name": "mine",
        "domain": "traffic",
        "params": {"net_file": "single.net.xml"},
        "policies": {"heuristics": [{"use": "fixed-time"}]},
        "seeds": {"train": [0], "eval": {"start": 10, "count": 1}},
    }
    file = tmp_path / "study" / "s.yaml"
    file.write_text(yaml.safe_dump(scenario))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    result = CliRunner().invoke(app, ["validate", "--build", str(file)])
    assert result.exit_code == 0, result.output


def test_a_network_without_pedestrians_leaves_their_measures_undefined_not_zero() -> None:
    """cologne1 has no sidewalks: page 1 must not show a pedestrian delay of 0 s for it."""
    env = TrafficEnv(TrafficParams(resco="cologne1", periods=SHORT))
    try:
        env.reset(seed=0)
        while env.agents:
            env.step({agent: 0 for agent in env.agents})
        info = env.episode_info()
    finally:
        env.close()
    assert info["vehicle_delay_mean"] > 0 and math.isfinite(info["person_delay_mean"])
    assert all(
        math.isnan(info[k]) for k in ("pedestrian_delay_mean", "pedestrian_delay_p95", "pedestrian_max_wait")
    )
