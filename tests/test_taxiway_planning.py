"""Taxi controllers: planners are conflict-free where they report success; FCFS beats no control."""

from __future__ import annotations

import numpy as np
import pytest

from fieldrl.domains.taxiway.domain import TaxiwayLockstepEnvs
from fieldrl.domains.taxiway.env import TaxiwayEnv
from fieldrl.domains.taxiway.heuristics import CBS, FCFS, Prioritized, ShortestPath, first_conflict
from fieldrl.domains.taxiway.params import TaxiwayParams
from fieldrl.simulators.airport.planning import Reservations, plan_path


def run(policy, params: TaxiwayParams, seeds: list[int]) -> list[TaxiwayEnv]:
    envs = TaxiwayLockstepEnvs([TaxiwayEnv(params) for _ in seeds], seeds, [])
    obs = envs.reset()
    policy.reset(envs.n)
    policy.bind_envs(envs)
    done = np.zeros(envs.n, dtype=bool)
    while not done.all():
        obs, _, term, trunc, _ = envs.step(policy.act(obs, np.zeros(envs.n, dtype=bool)))
        done |= term | trunc
    return envs.envs


@pytest.mark.parametrize(
    ("layout", "density", "slots"), [("small", "high", 16), ("large", "medium", 40), ("large", "high", 48)]
)
def test_prioritized_planning_is_conflict_free_where_it_reports_success(layout, density, slots):
    params = TaxiwayParams(layout=layout, density=density, max_slots=slots)
    envs = run(Prioritized("pp"), params, [11, 12, 13])
    succeeded = [e for e in envs if e.plan_failures == 0]
    assert len(succeeded) >= 2
    for env in succeeded:
        info = env.episode_info()
        assert info["conflicts_per_100"] == 0.0, env.sim.conflict_counts
        assert info["completed_pct"] == 100.0
        assert env.plans >= info["completed"]


def test_cbs_is_conflict_free_where_it_reports_success():
    params = TaxiwayParams(layout="small", density="medium", max_slots=16)
    envs = run(CBS("cbs", time_limit_s=0.3, max_agents=6), params, [21, 22])
    for env in envs:
        if env.plan_failures == 0:
            assert env.episode_info()["conflicts_per_100"] == 0.0
    assert any(env.plans > 0 for env in envs)


def test_fcfs_has_fewer_conflicts_than_no_control_and_the_detector_sees_uncontrolled_ones():
    params = TaxiwayParams(layout="large", density="medium", max_slots=40)
    seeds = [31, 32, 33]
    free = sum(e.episode_info()["conflicts"] for e in run(ShortestPath("sp"), params, seeds))
    held = sum(e.episode_info()["conflicts"] for e in run(FCFS("fcfs"), params, seeds))
    assert free > 0
    assert held < free


def test_astar_plans_around_a_reserved_plan():
    env = TaxiwayEnv(TaxiwayParams(layout="small", density="high"))
    env.reset(seed=4)
    sim = env.sim
    while len(sim.active) < 2:
        env.step({a: 0 for a in env.agents})
    i, j = sim.active[:2]
    res = Reservations()
    mi, mj = sim.movements[i], sim.movements[j]
    first = plan_path(sim, res, i, mi.pos, mi.goal, sim.t)
    assert first is not None and first[-1] == mi.goal
    res.add(sim.s, first, sim.t, i, sim.cfg.roll_steps, mi.runway if mi.departure else -1)
    second = plan_path(sim, res, j, mj.pos, mj.goal, sim.t)
    assert second is not None
    assert first_conflict(sim, {i: first, j: second}, sim.t) is None
    lone = plan_path(sim, Reservations(), j, mj.pos, mj.goal, sim.t)
    assert len(second) >= len(lone)
