"""The taxiway ParallelEnv: PettingZoo conformance, masks, observations, rewards, determinism, params."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test
from pydantic import ValidationError

from fieldrl.domains.taxiway.env import OWN, TERMS, TaxiwayEnv, parallel_env
from fieldrl.domains.taxiway.params import TaxiwayParams
from fieldrl.simulators.airport.layout import PRIVATE_KINDS, UNREACHABLE


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
    env = parallel_env(layout="large", density="high", max_slots=40, safety_mask=False)
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


def test_safety_mask_removes_exactly_the_moves_that_conflict_whatever_the_others_do():
    env = parallel_env(layout="large", density="high", max_slots=40)
    sim, s = env.sim, env.surface
    env.reset(seed=3)
    removed = kept = 0
    for _ in range(120):
        cells = {i: sim.cell(i) for i in sim.active}
        for agent in env.agents:
            i = env.index(agent)
            m = sim.movements[i]
            mask, legal = env.action_mask(agent), sim.legal_actions(i)
            assert mask[0] and set(np.flatnonzero(mask)) <= set(legal)
            for a in legal[1:]:
                q = s.action_target(m.pos, a)
                c, e = int(s.pos_cell[q]), int(s.pos_edge[q])
                occupied = any(cc == c for j, cc in cells.items() if j != i)
                oncoming = (
                    e >= 0
                    and e != int(s.pos_edge[m.pos])
                    and any(
                        int(s.pos_edge[sim.movements[j].pos]) == e
                        and int(s.pos_dir[sim.movements[j].pos]) != int(s.pos_dir[q])
                        for j in sim.active
                        if j != i
                    )
                )
                r = int(s.cell_runway[c])
                runway = (
                    r >= 0
                    and r != int(s.cell_runway[s.pos_cell[m.pos]])
                    and sim.runway_active(r, sim.t + 1, exclude=i)
                )
                assert bool(mask[a]) == (not (occupied or oncoming or runway))
                removed += int(not mask[a])
                kept += int(mask[a])
        env.step({a: int(np.flatnonzero(env.action_mask(a))[-1]) for a in env.agents})
    assert removed > 10 and kept > 50


def test_safety_mask_prevents_driving_into_a_holding_aircraft():
    """Two aircraft on the same shortest path, the first holding: the second may not close in."""
    for safety in (True, False):
        env = parallel_env(layout="small", density="low", safety_mask=safety)
        env.reset(seed=0)
        sim, s = env.sim, env.surface
        goal = sim.movements[0].goal if sim.movements[0].departure else sim.movements[0].start
        # place aircraft 0 and 1 one hop apart along 1's shortest path to the goal
        lead, follow = sim.movements[0], sim.movements[1]
        follow.goal, lead.goal = goal, goal
        far = int(np.argmax(np.where(s.dist_to(goal) < UNREACHABLE, s.dist_to(goal), -1)))
        follow.pos = far
        lead.pos = int(s.next_to(goal)[far])
        sim.active = [0, 1]
        allowed = env.allowed(1)
        toward = [a for a in sim.legal_actions(1)[1:] if s.action_target(far, a) == lead.pos]
        assert toward
        assert all((a in allowed) != safety for a in toward)


def test_seniority_feature_tells_two_aircraft_in_one_cell_apart():
    env = parallel_env(layout="small", density="high")
    env.reset(seed=2)
    sim = env.sim
    while len(sim.active) < 2:
        env.step({a: 0 for a in env.agents})
    i, j = sim.active[:2]
    sim.movements[j].pos = sim.movements[i].pos
    obs = env._observe()
    assert {obs[f"ac{i}"][OWN - 1], obs[f"ac{j}"][OWN - 1]} == {0.0, 1.0}


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


def test_detour_after_masks_moves_away_from_the_goal_until_the_aircraft_has_waited():
    env = parallel_env(layout="large", density="high", max_slots=40, detour_after=3)
    env.reset(seed=3)
    sim, s = env.sim, env.surface
    checked = waited = 0
    for _ in range(80):
        for agent in env.agents:
            i = env.index(agent)
            m = sim.movements[i]
            dist = s.dist_to(m.goal)
            away = [a for a in sim.safe_actions(i)[1:] if dist[s.action_target(m.pos, a)] >= dist[m.pos]]
            mask = env.action_mask(agent)
            if s.pos_node[m.pos] >= 0 and away:
                assert all(mask[a] == (m.wait_run >= 3) for a in away)
                checked += 1
                run, m.wait_run = m.wait_run, 3  # once it has waited long enough, detours open
                assert all(env.action_mask(agent)[a] for a in away)
                m.wait_run = run
                waited += 1
        env.step(
            {
                a: 0 if env.index(a) % 3 == 0 else int(np.flatnonzero(env.action_mask(a))[-1])
                for a in env.agents
            }
        )
    assert checked == waited > 5
