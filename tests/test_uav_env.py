"""UAV ParallelEnv: PettingZoo conformance, reward decoupling, rectifier, heuristics, graceful failures."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from fieldrl.domains.uav import DOMAIN
from fieldrl.domains.uav.env import UavParallelEnv, parallel_env
from fieldrl.domains.uav.pipeline import allocation_from_actions, optimise_slot
from fieldrl.domains.uav.rectifier import LanguageModelRectifier, RuleRectifier
from fieldrl.evaluation.runner import run_episodes
from fieldrl.simulators.uav.params import UavParams

SMALL = {"n_uavs": 2, "n_vehicles": 8, "episode_slots": 6, "load": 2.0}


@pytest.mark.parametrize("pipeline, agent_ids", [(True, False), (False, False), (False, True)])
def test_env_passes_pettingzoo_api_and_seed_tests(pipeline, agent_ids):
    parallel_api_test(parallel_env(pipeline=pipeline, agent_ids=agent_ids, **SMALL), num_cycles=10)
    parallel_seed_test(lambda: parallel_env(pipeline=pipeline, agent_ids=agent_ids, **SMALL))


def _rollout(params: UavParams, seed: int, actions: np.ndarray) -> tuple[list[float], dict[str, float]]:
    env = UavParallelEnv(params)
    env.reset(seed=seed)
    rewards = []
    t = 0
    while env.agents:
        _, rew, *_ = env.step({a: int(actions[t, i]) for i, a in enumerate(env.agents)})
        rewards.append(rew["uav_0"])
        t += 1
    return rewards, env.episode_info()


def test_reward_is_decoupled_from_the_rectifier():
    actions = np.random.default_rng(0).integers(0, 12, size=(6, 2))
    with_rect, info_rect = _rollout(UavParams(**SMALL), 5, actions)
    without, info_none = _rollout(UavParams(rectifier="none", **SMALL), 5, actions)
    # the agents' reward is computed on their own allocation, before any rectification
    assert with_rect == pytest.approx(without)
    # ... while the executed plan is the rectified one, which never costs more
    assert info_rect["cost"] <= info_none["cost"] + 1e-9
    assert info_rect["success_rate"] >= info_none["success_rate"]
    assert info_rect["rectified"] > 0


def test_rectifier_loop_never_raises_the_slot_cost():
    params = UavParams(n_uavs=3, n_vehicles=20, load=3.0)
    env = UavParallelEnv(params)
    for seed in range(3):
        env.reset(seed=seed)
        world = env.world
        pl = world.path_loss_db()
        se = world.spectral_efficiency(pl)
        alloc = allocation_from_actions(world, np.array([6, 0, 1]), ["equal"] * 3, se)
        result = optimise_slot(world, alloc, RuleRectifier(), 4, pl)
        assert result.outcome.cost.sum() <= result.first.cost.sum() + 1e-9
        # the executed shares are a valid split of every server
        for s in range(world.m + 1):
            on = result.alloc.server == s
            assert result.alloc.bw_share[on].sum() <= 1 + 1e-9
            assert result.alloc.cpu_share[on].sum() <= 1 + 1e-9


def test_language_model_adapter_applies_checked_moves_and_falls_back_on_nonsense():
    params = UavParams(n_uavs=2, n_vehicles=10, load=3.0)
    env = UavParallelEnv(params)
    env.reset(seed=2)
    world = env.world
    pl = world.path_loss_db()
    alloc = allocation_from_actions(world, np.array([0, 0]), ["equal"] * 2, world.spectral_efficiency(pl))
    outcome = world.evaluate(alloc, np.zeros(world.n), pl)
    prompts: list[str] = []

    def backend(prompt: str) -> str:
        prompts.append(prompt)
        failed = json.loads(prompt)["failed_tasks"]
        return json.dumps({"moves": [{"vehicle": failed[0]["vehicle"], "server": 0}]})

    lm = LanguageModelRectifier(backend)
    new = lm.rectify(world, alloc, np.zeros(world.n), outcome, pl)
    moved = json.loads(prompts[0])["failed_tasks"][0]["vehicle"]
    assert new is not None and new.server[moved] == 0 and lm.fallbacks == 0
    bad = LanguageModelRectifier(lambda prompt: "I would move vehicle 3 to the UAV")
    assert bad.rectify(world, alloc, np.zeros(world.n), outcome, pl) is not None
    assert bad.fallbacks == 1
    out_of_range = LanguageModelRectifier(lambda prompt: '{"moves": [{"vehicle": 99, "server": 0}]}')
    out_of_range.rectify(world, alloc, np.zeros(world.n), outcome, pl)
    assert out_of_range.fallbacks == 1


def test_env_with_language_model_rectifier_runs_an_episode():
    env = parallel_env(rectifier=LanguageModelRectifier(lambda prompt: '{"moves": []}'), **SMALL)
    env.reset(seed=0)
    while env.agents:
        env.step({a: 3 for a in env.agents})
    assert 0 <= env.episode_info()["success_rate"] <= 100


def test_impossible_deadlines_fail_tasks_gracefully():
    params = UavParams(deadline_min_s=1e-4, deadline_max_s=1e-4, **SMALL)
    env = UavParallelEnv(params)
    env.reset(seed=0)
    while env.agents:
        _, rew, *_ = env.step({a: 5 for a in env.agents})
        assert np.isfinite(rew["uav_0"])
    info = env.episode_info()
    assert info["success_rate"] == 0.0 and np.isfinite(info["cost"])


def test_zero_bandwidth_keeps_every_task_local():
    params = UavParams(uav_bandwidth_mhz=0.0, bs_bandwidth_mhz=0.0, **SMALL)
    for pipeline in (True, False):
        env = UavParallelEnv(params.model_copy(update={"pipeline": pipeline}))
        env.reset(seed=1)
        while env.agents:
            env.step({a: env.n_actions - 1 for a in env.agents})
        info = env.episode_info()
        assert info["transmission_j"] == 0.0
        assert np.isfinite(info["cost"]) and 0 <= info["success_rate"] < 100


def test_heuristics_rank_as_expected_and_all_local_sends_nothing():
    params = UavParams(**SMALL)
    seeds = [100, 101, 102]
    kpis = {}
    for name, spec in DOMAIN.heuristics.items():
        policy = spec.build(spec.settings_model(), params, name)
        kpis[name], _ = run_episodes(DOMAIN, params, policy, seeds)
    assert (kpis["all-local"]["transmission_j"] == 0).all()
    assert kpis["greedy"]["success_rate"].mean() > kpis["all-local"]["success_rate"].mean()
    assert kpis["greedy"]["cost"].mean() < kpis["all-local"]["cost"].mean()


def test_centralised_heuristic_refuses_to_act_unbound():
    spec = DOMAIN.heuristics["greedy"]
    policy = spec.build(spec.settings_model(), UavParams(**SMALL), "greedy")
    policy.reset(1)
    with pytest.raises(RuntimeError, match="bind_envs"):
        policy.act(np.zeros((1, 2, 4)), np.ones(1, bool))


def test_eval_envs_report_kpis_and_positions_for_the_map():
    params = UavParams(**SMALL)
    envs = DOMAIN.make_eval_envs(params, [7, 8])
    obs = envs.reset()
    assert obs.shape == (2, 2, 12 + 6 * params.n_observed)
    done = np.zeros(2, bool)
    while not done.all():
        obs, reward, term, trunc, info = envs.step(np.zeros((2, 2), dtype=int))
        done |= term | trunc
    assert {"success_rate", "cost", "socp_ms", "lp_ms", "uav1_z", "veh7_y"} <= set(info)
    assert (info["socp_ms"] > 0).all() and (info["lp_ms"] > 0).all()


def test_train_vec_env_has_one_slot_per_uav():
    venv = DOMAIN.make_train_vec_env(UavParams(**SMALL), n_envs=2, seed=0)
    obs = venv.reset()
    assert venv.num_envs == 4 and obs.shape == (4, 12 + 6 * 6)
    _, rewards, dones, _ = venv.step(np.zeros(4, dtype=int))
    assert rewards.shape == (4,) and not dones.any()


def test_fixed_allocation_drives_the_full_pipeline_with_one_action():
    params = UavParams(**SMALL)
    spec = DOMAIN.heuristics["pipeline-fixed"]
    policy = spec.build(spec.settings_model(admit=5, shares="equal"), params, "fixed")
    assert policy.action == params.admit_levels.index(4) * 2  # largest level <= 5, equal shares
    kpis, _ = run_episodes(DOMAIN, params, policy, [100, 101])
    assert (kpis["lp_ms"] > 0).all() and (kpis["socp_ms"] > 0).all()
    with pytest.raises(ValueError, match="shares"):
        spec.settings_model(shares="fair")
