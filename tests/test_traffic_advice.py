"""Webster's timing on fieldrl's controller: the ``webster-timed`` heuristic and the ``advice`` input."""

from __future__ import annotations

import numpy as np
import pytest

from fieldrl.domains.traffic.env import TrafficEnv
from fieldrl.domains.traffic.params import PeriodModel, TrafficParams
from fieldrl.domains.traffic.programs import program_phases, stage_plan

SHORT = [PeriodModel(name="peak", duration_s=240, vehicles_main=600, vehicles_side=300, pedestrians=600)]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FIELDRL_TRAFFIC_DIR", str(tmp_path_factory.getbasetemp() / "traffic-cache"))


def test_stage_plan_reads_greens_and_order_and_skips_clearances():
    a, b, walk = "GGrrGr", "rrGGrG", "rrrrGG"
    phases = [(20.0, a), (5.0, "GGrrrr"), (3.0, "yyrrrr"), (1.0, "rrrrrr"), (14.0, b), (3.0, "rryyrr")]
    green, following = stage_plan(phases, [a, b, walk])
    assert green == {0: 20, 1: 14}
    assert following == {0: 1, 1: 0}  # the walk stage is never shown by this program


def _greens_under_advice(env: TrafficEnv) -> tuple[list[tuple[int, int]], dict[int, int]]:
    """Follow the advice every second; return (stage, seconds of green it had) at every change."""
    agent = env.possible_agents[0]
    greens: list[tuple[int, int]] = []
    obs, _ = env.reset(seed=3)
    while env.agents:
        ctl = env.controllers[agent]
        advised = env.advised_stage(agent)
        one_hot = obs[agent][-env.n_stages :]
        assert one_hot.sum() == 1.0 and one_hot[advised] == 1.0
        if not ctl.in_transition and advised != ctl.stage:
            greens.append((ctl.stage, ctl.green_time))
        obs, *_ = env.step({agent: advised})
        if greens and not ctl.in_transition and ctl.stage == greens[-1][0]:
            raise AssertionError("the controller did not change stage when the advice asked")
    return greens, env._webster[agent][0]


def test_following_the_advice_gives_each_stage_its_webster_green_in_webster_order():
    env = TrafficEnv(TrafficParams(periods=SHORT, decision_s=1, advice=True))
    try:
        greens, webster = _greens_under_advice(env)
    finally:
        env.close()
    assert len(greens) >= 4
    stages = [s for s, _ in greens]
    assert set(stages) == set(webster)  # only the stages Webster shows (no pedestrian stage)
    assert all(a != b for a, b in zip(stages, stages[1:], strict=False))  # it alternates, as the program
    assert greens == [(stage, webster[stage]) for stage in stages]


def test_advice_adds_a_one_hot_of_the_stages_and_only_with_advice():
    plain = TrafficEnv(TrafficParams(periods=SHORT))
    advised = TrafficEnv(TrafficParams(periods=SHORT, advice=True))
    try:
        assert advised.obs_dim == plain.obs_dim + plain.n_stages
        agent = advised.possible_agents[0]
        assert advised.observation_space(agent).shape == (plain.obs_dim + plain.n_stages,)
        obs, _ = advised.reset(seed=1)
        assert np.argmax(obs[agent][plain.obs_dim :]) == advised.advised_stage(agent)
    finally:
        plain.close()
        advised.close()


def test_webster_file_program_is_read_per_junction(tmp_path):
    env = TrafficEnv(TrafficParams(periods=SHORT, network="grid"))
    phases = program_phases(env._webster_file(), "webster")
    assert sorted(phases) == sorted(env.possible_agents)
    assert all(sum(d for d, _ in p) > 0 for p in phases.values())


def test_advice_env_passes_the_conformance_suites():
    from gymnasium.utils.env_checker import check_env
    from pettingzoo.test import parallel_api_test
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    from fieldrl.domains.traffic.gym_env import SingleSignalEnv

    env = TrafficEnv(TrafficParams(periods=SHORT, network="grid", advice=True))
    try:
        parallel_api_test(env, num_cycles=100)
    finally:
        env.close()
    single = SingleSignalEnv(TrafficParams(periods=SHORT, advice=True))
    try:
        check_env(single, skip_render_check=True)
        sb3_check_env(single, warn=True)
    finally:
        single.close()


COLOGNE = {
    "net_file": "sumo-rl:RESCO/cologne1/cologne1.net.xml",
    "route_file": "sumo-rl:RESCO/cologne1/cologne1.rou.xml",
}


def test_webster_timing_is_refused_where_the_network_brings_its_own_routes():
    from pydantic import ValidationError

    from fieldrl.domains.traffic import DOMAIN

    with pytest.raises(ValidationError, match="advice shows Webster's timing, which fieldrl builds only"):
        TrafficParams(**COLOGNE, advice=True)
    own = TrafficParams(**COLOGNE)
    for use in ("webster", "webster-timed"):
        assert "its own routes" in DOMAIN.heuristic_problem(use, own)
        assert DOMAIN.heuristic_problem(use, TrafficParams(periods=SHORT)) is None
    assert DOMAIN.heuristic_problem("max-pressure", own) is None
