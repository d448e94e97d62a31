"""Traffic domain: generated networks and demand, signal safety, env conformance, KPIs."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from pydantic import ValidationError

from fieldrl.domains.traffic.demand import Period, demand_xml
from fieldrl.domains.traffic.env import TrafficEnv, net_file_for
from fieldrl.domains.traffic.networks import NetworkOptions, build_network
from fieldrl.domains.traffic.params import PeriodModel, TrafficParams
from fieldrl.domains.traffic.signals import SignalLayout, StageController, Timing

SHORT = [
    PeriodModel(name="peak", duration_s=120, vehicles_main=600, vehicles_side=300, pedestrians=600),
]


def short(**kw) -> TrafficParams:
    return TrafficParams(periods=SHORT, **kw)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FIELDRL_TRAFFIC_DIR", str(tmp_path_factory.getbasetemp() / "traffic-cache"))


# ----------------------------------------------------------------------------- networks and demand


def test_generated_grid_has_sidewalks_crossings_walkingareas_and_signals_only_inside():
    net = ET.parse(build_network(NetworkOptions(layout="grid"))).getroot()
    junctions = {j.get("id"): j.get("type") for j in net.iter("junction") if j.get("type") != "internal"}
    signals = sorted(j for j, t in junctions.items() if t == "traffic_light")
    assert signals == ["A0", "A1", "B0", "B1"]
    functions = [e.get("function") for e in net.iter("edge")]
    assert functions.count("crossing") == 16 and functions.count("walkingarea") >= 16
    lanes0 = [e.find("lane") for e in net.iter("edge") if e.get("function") is None]
    assert all(lane.get("allow") == "pedestrian" for lane in lanes0)


def test_demand_is_reproducible_per_seed_and_differs_between_seeds():
    net = build_network(NetworkOptions(layout="single"))
    periods = [Period("off", 300, 300, 100, 100), Period("surge", 300, 300, 100, 900)]
    a, b, c = (
        demand_xml(net, periods, 1, 0.2),
        demand_xml(net, periods, 1, 0.2),
        demand_xml(net, periods, 2, 0.2),
    )
    assert a == b and a != c
    root = ET.fromstring(a)
    peds = {f.get("begin"): 0.0 for f in root.iter("personFlow")}
    for f in root.iter("personFlow"):
        peds[f.get("begin")] += float(f.get("probability")) * 3600
    assert peds["300"] > 5 * peds["0"]  # the surge period has 9x the pedestrian rate (jitter <= 20 %)
    assert {f.get("begin") for f in root.iter("flow")} == {"0", "300"}


# ----------------------------------------------------------------------------- signal safety


def _layout() -> SignalLayout:
    # links 0,1 vehicles north-south; 2,3 vehicles east-west; 4 crossing parallel to NS; 5 to EW
    return SignalLayout(
        tls="J",
        states=["GGrrGr", "rrGGrG", "rrrrGG"],
        vehicle_links=[0, 1, 2, 3],
        crossing_links=[4, 5],
        in_lanes=["n", "s", "e", "w"],
        crossings=[":J_c0", ":J_c1"],
        walkingareas={":J_w0"},
        link_lanes=[("n", "x"), ("s", "x"), ("e", "x"), ("w", "x")],
    )


def test_switch_runs_pedestrian_clearance_then_yellow_then_all_red_then_min_green():
    ctl = StageController(
        _layout(), Timing(min_green_s=10, max_green_s=60, yellow_s=3, all_red_s=1, ped_clearance_s=5)
    )
    assert ctl.allowed() == [True, False, False]  # min green not served yet
    for _ in range(10):
        ctl.tick()
    ctl.request(1)
    shown = [ctl.tick() for _ in range(9)]
    assert shown[:5] == ["GGrrrr"] * 5  # crossing 4 red first, vehicles keep green
    assert shown[5:8] == ["yyrrrr"] * 3
    assert shown[8] == "rrrrrr"
    assert ctl.stage == 1 and ctl.tick() == "rrGGrG"
    assert ctl.allowed() == [False, True, False]


def test_links_green_in_both_stages_stay_green_and_max_green_forces_a_change():
    ctl = StageController(_layout(), Timing(min_green_s=5, max_green_s=20, ped_clearance_s=5))
    ctl.reset(2)
    for _ in range(20):
        ctl.tick()
    assert ctl.allowed() == [True, True, False]
    ctl.request(2)  # not allowed: the controller moves on
    assert ctl.in_transition and ctl.target != 2
    shown = ctl.tick()
    crossing = 4 if ctl.target == 0 else 5
    assert shown[crossing] == "G"  # crossing green in both stages is never interrupted


# ----------------------------------------------------------------------------- envs


def test_single_intersection_gym_env_passes_gymnasium_and_sb3_checks():
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    from fieldrl.domains.traffic.gym_env import SingleSignalEnv

    env = SingleSignalEnv(short())
    try:
        check_env(env, skip_render_check=True)
        sb3_check_env(env, warn=True)
    finally:
        env.close()


def test_grid_parallel_env_passes_pettingzoo_api_and_seed_tests():
    from pettingzoo.test import parallel_api_test, parallel_seed_test

    env = TrafficEnv(short(network="grid"))
    assert env.possible_agents == ["A0", "A1", "B0", "B1"]
    try:
        parallel_api_test(env, num_cycles=100)
    finally:
        env.close()
    # two simulations at once: TraCI (libsumo allows one per process)
    parallel_seed_test(lambda: TrafficEnv(short(network="grid", traci=True)), num_cycles=30)


def test_libsumo_refuses_a_second_simulation_in_one_process():
    a, b = TrafficEnv(short()), TrafficEnv(short())
    a.reset(seed=1)
    try:
        with pytest.raises(RuntimeError, match="one simulation per process"):
            b.reset(seed=1)
    finally:
        a.close()
        b.close()


def test_observation_counts_waiting_pedestrians_and_masks_follow_min_green():
    env = TrafficEnv(short(min_green_s=15))
    obs, _ = env.reset(seed=4)
    agent = env.agents[0]
    assert env.action_mask(agent).tolist() == [True, False, False]
    saw_peds = False
    for _ in range(16):  # hold NS green for 80 s: people at the EW crossings wait
        obs, rew, term, trunc, _ = env.step({agent: 0})
        ped_block = obs[agent][-2 * env.n_crossings :]
        saw_peds |= bool(ped_block.max() > 0)
        assert rew[agent] <= 0.0
    assert saw_peds
    assert env.action_mask(agent).all()
    info = env.episode_info()
    assert info["pedestrian_delay_mean"] > 0 and info["vehicle_delay_mean"] > 0
    assert info["pedestrian_max_wait"] >= 20  # held for 80 s: people arriving early waited long
    for _ in range(2):
        env.step({agent: 0})
    # max green (90 s) reached mid-interval: the controller moved on to the next stage by itself
    assert env.controllers[agent].green_time <= 90 and env.controllers[agent].target == 1
    assert env.action_mask(agent).tolist() == [False, True, False]
    env.close()


def test_fixed_time_program_runs_inside_sumo_and_ignores_actions():
    env = TrafficEnv(short(), native_program="0")
    env.reset(seed=2)
    stages = set()
    while env.agents:
        env.step({"A0": 2})  # would be the pedestrian stage under fieldrl control
        stages.add(env.episode_info()["stage_now"])
    assert {0.0, 1.0} <= stages and 2.0 not in stages
    env.close()


def test_bad_params_name_the_field_and_what_is_allowed():
    with pytest.raises(ValidationError, match="unknown reward terms"):
        TrafficParams(reward_weights={"speed": 1.0})
    with pytest.raises(ValidationError, match="max_green_s"):
        TrafficParams(min_green_s=30, max_green_s=20)
    with pytest.raises(ValidationError, match="network"):
        TrafficParams(network="ring")
    with pytest.raises(ValidationError, match="does not exist"):
        TrafficParams(net_file="/nonexistent.net.xml")


def test_users_can_bring_their_own_network(tmp_path):
    net = build_network(NetworkOptions(layout="arterial"))
    own = tmp_path / "mine.net.xml"
    own.write_bytes(net.read_bytes())
    env = TrafficEnv(short(net_file=str(own)))
    assert net_file_for(env.params) == own
    assert len(env.possible_agents) == 4
    obs, _ = env.reset(seed=0)
    assert all(np.asarray(o).shape == (env.obs_dim,) for o in obs.values())
    env.close()


def test_training_with_several_libsumo_simulations_uses_one_process_each():
    from fieldrl.domains.traffic import DOMAIN
    from fieldrl.domains.traffic.vec import SubprocSlotVecEnv

    venv = DOMAIN.make_train_vec_env(short(network="grid"), n_envs=2, seed=3)
    try:
        assert isinstance(venv, SubprocSlotVecEnv) and venv.num_envs == 8  # 2 grids x 4 signals
        obs = venv.reset()
        assert obs.shape == (8, venv.observation_space.shape[0])
        masks = venv.env_method("action_masks")
        assert len(masks) == 8 and all(m[0] and not m[1] for m in masks)  # min green at the start
        for _ in range(3):
            obs, rew, done, infos = venv.step(np.zeros(8, dtype=np.int64))
        assert rew.shape == (8,) and not done.any()
    finally:
        venv.close()


def test_actuated_program_extends_every_green_but_not_yellows_or_pedestrian_clearances():
    from fieldrl.domains.traffic.programs import actuated_xml

    phases = [
        (37.0, "gGGrrrGr"),  # major green, crossing 6 green
        (5.0, "gGGrrrrr"),  # pedestrian clearance: the same vehicle greens, crossing red
        (3.0, "yyyrrrrr"),
        (6.0, "rrrGGrrr"),  # short protected left turn
        (3.0, "rrryyrrr"),
    ]
    root = ET.fromstring(actuated_xml({"J": phases}, 10, 90))
    got = [(p.get("state"), p.get("minDur"), p.get("maxDur")) for p in root.iter("phase")]
    assert got == [
        ("gGGrrrGr", "10", "90"),
        ("gGGrrrrr", None, None),
        ("yyyrrrrr", None, None),
        ("rrrGGrrr", "6", "90"),
        ("rrryyrrr", None, None),
    ]


def test_actuated_settings_set_its_own_green_limits_and_reject_max_below_min():
    from types import SimpleNamespace

    from fieldrl.domains.traffic.heuristics import HEURISTICS

    spec = HEURISTICS["actuated"]
    with pytest.raises(ValidationError, match="max_green_s"):
        spec.settings_model.model_validate({"min_green_s": 30, "max_green_s": 20})
    policy = spec.build(
        spec.settings_model.model_validate({"min_green_s": 20, "max_green_s": 40}), short(), "a"
    )
    env = TrafficEnv(short())
    env.reset(seed=3)
    policy.bind_envs(SimpleNamespace(envs=[env]))
    logic = next(
        lg for lg in env._handle.trafficlight.getAllProgramLogics("A0") if lg.programID == "actuated"
    )
    limits = sorted({(ph.minDur, ph.maxDur) for ph in logic.phases if ph.minDur != ph.maxDur})
    assert limits == [(20.0, 40.0)]
    assert env._handle.trafficlight.getProgram("A0") == "actuated"
    env.close()


def test_report_knows_vehicle_only_networks_and_draws_one_delay_panel_for_them():
    import pandas as pd

    from fieldrl.domains.traffic.report import delay_boxes, has_pedestrians

    resco = TrafficParams(
        net_file="sumo-rl:RESCO/cologne1/cologne1.net.xml",
        route_file="sumo-rl:RESCO/cologne1/cologne1.rou.xml",
        begin_s=25200,
    )
    assert not has_pedestrians(resco)
    assert has_pedestrians(short())
    rows = [
        {"variant": "default", "policy": p, "metric": m, "value": v}
        for p, v in (("a", 10.0), ("b", 20.0))
        for m in ("vehicle_delay_mean", "vehicle_delay_p95")
    ]
    png = delay_boxes(pd.DataFrame(rows), "default", ["a", "b"], {}, pedestrians=False)
    assert png is not None and png[:4] == b"\x89PNG"
