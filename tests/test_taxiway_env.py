"""The taxiway ParallelEnv: PettingZoo conformance, masks, observations, rewards, determinism, params."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test
from pydantic import ValidationError

from fieldrl.domains.taxiway.env import OWN, TERMS, TaxiwayEnv, parallel_env
from fieldrl.domains.taxiway.params import TaxiwayParams
from fieldrl.simulators.airport_layout import PRIVATE_KINDS, UNREACHABLE


@pytest.mark.parametrize(("layout", "density"), [("small", "high"), ("large", "low")])
def test_env_passes_pettingzoo_api_test(layout, density):
    parallel_api_test(parallel_env(layout=layout, density=density, max_slots=32), num_cycles=400)


def test_env_passes_pettingzoo_seed_test():
    parallel_seed_test(lambda: parallel_env(layout="small", density="medium"))


def _random_episode(env: TaxiwayEnv, seed: int, policy_seed: int = 0):
    rng = np.random.default_rng(policy_seed)
    obs, _ = env.reset(seed=seed)
    trail = []
    while env.agents:
        for agent in env.agents:
            assert env.observation_space(agent).contains(obs[agent])
        acts = {a: int(rng.choice(np.flatnonzero(env.action_mask(a)))) for a in env.agents}
        obs, rew, term, trunc, info = env.step(acts)
        trail.append(sorted(rew.items()))
    return trail, env.episode_info()


def test_same_seed_same_episode_and_traffic_does_not_depend_on_the_policy():
    a = _random_episode(parallel_env(layout="small", density="high"), seed=7)
    b = _random_episode(parallel_env(layout="small", density="high"), seed=7)
    assert a == b
    env1, env2 = parallel_env(layout="small", density="high"), parallel_env(layout="small", density="high")
    env1.reset(seed=7)
    env2.reset(seed=7)
    sched = lambda env: [(m.departure, m.request, m.goal, m.start) for m in env.sim.movements]  # noqa: E731
    assert sched(env1) == sched(env2)
    _random_episode(env1, seed=7, policy_seed=1)
    _random_episode(env2, seed=7, policy_seed=2)
    assert [m.request for m in env1.sim.movements] == [m.request for m in env2.sim.movements]


def test_masks_allow_hold_and_only_moves_toward_a_reachable_goal():
    env = parallel_env(layout="large", density="high", max_slots=40)
    env.reset(seed=3)
    s = env.surface
    seen = 0
    for _ in range(60):
        for agent in env.agents:
            i = env.index(agent)
            m = env.sim.movements[i]
            mask = env.action_mask(agent)
            assert mask[0]
            for a in np.flatnonzero(mask)[1:]:
                q = s.action_target(m.pos, int(a))
                assert q != m.pos and s.dist_to(m.goal)[q] < UNREACHABLE
                k = int(s.pos_node[q])
                assert k < 0 or k == m.goal or s.node_kind[k] not in PRIVATE_KINDS
                seen += 1
            if s.pos_node[m.pos] < 0:  # inside a segment: hold or continue
                assert mask.sum() == 2 and mask[1]
        env.step({a: int(np.flatnonzero(env.action_mask(a))[-1]) for a in env.agents})
    assert seen > 50


def test_reward_is_the_weighted_sum_of_its_terms_and_conflicts_cost_safety():
    params = TaxiwayParams(layout="small", density="high")
    env = TaxiwayEnv(params)
    w = np.array([getattr(params.weights, t) for t in TERMS])
    env.reset(seed=1)
    conflicts_seen = 0
    while env.agents:
        acts = {
            a: int(np.flatnonzero(env.action_mask(a))[1] if env.action_mask(a).sum() > 1 else 0)
            for a in env.agents
        }
        _, rew, _, _, info = env.step(acts)
        for agent, r in rew.items():
            terms = info[agent]["reward_terms"]
            assert r == pytest.approx(float(w @ terms), abs=1e-5)
            if env._last is not None and env._last.new_conflicts.get(env.index(agent)):
                assert terms[0] <= -1.0
                conflicts_seen += 1
    assert conflicts_seen > 0


def test_foresight_sees_an_aircraft_ahead_on_the_own_path():
    env = parallel_env(layout="large", density="high", max_slots=40)
    env.reset(seed=5)
    found = False
    for _ in range(200):
        obs = env._observe()
        for o in obs.values():
            level2 = o[OWN + 4 : OWN + 4 + 2 * env.horizon : 2]
            if level2.any():
                found = True
        if found or not env.agents:
            break
        env.step({a: 0 for a in env.agents})  # everyone holds: new aircraft queue up behind
    assert found


def test_episode_info_has_the_kpi_numbers():
    env = parallel_env(layout="small", density="low")
    _, info = _random_episode(env, seed=2)
    for key in (
        "conflicts_per_100",
        "taxi_time_min",
        "delay_pct",
        "throughput_per_hour",
        "crossing_wait_s",
        "completed_pct",
        "decision_ms",
    ):
        assert key in info
    assert info["movements"] >= info["completed"] >= 0


def test_bad_params_name_the_field_and_what_is_allowed():
    with pytest.raises(ValidationError, match="20-30 kt"):
        TaxiwayParams(cell_m=200.0, dt_s=5.0)
    with pytest.raises(ValidationError, match="layout"):
        TaxiwayParams(layout="heathrow")
    with pytest.raises(ValidationError, match="extra"):
        TaxiwayParams(runways=2)
