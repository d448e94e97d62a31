"""Taxiway planner advice (``params.advice``): prioritized planning's move, in the observation."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test
from test_taxiway_planning import run

from fieldrl.domains.taxiway.decisions import features
from fieldrl.domains.taxiway.env import TaxiwayEnv, parallel_env
from fieldrl.domains.taxiway.heuristics import Prioritized
from fieldrl.domains.taxiway.params import TaxiwayParams
from fieldrl.policies.base import Policy


class _FollowAdvice(Policy):
    """Takes the advised move: the one-hot at the end of each observation (an empty slot holds)."""

    name = "follow"

    def __init__(self, n_actions: int):
        self.n_actions = n_actions

    def reset(self, n_envs: int) -> None:
        pass

    def act(self, obs, episode_start):
        return np.asarray(obs)[..., -self.n_actions :].argmax(axis=-1)


def test_env_with_advice_passes_pettingzoo_api_and_seed_tests():
    parallel_api_test(parallel_env(layout="small", density="high", max_slots=16, advice=True), num_cycles=300)
    parallel_seed_test(lambda: parallel_env(layout="small", density="medium", advice=True))


def test_advice_adds_one_hot_of_the_actions_and_names_it():
    plain, advised = TaxiwayEnv(TaxiwayParams()), TaxiwayEnv(TaxiwayParams(advice=True))
    assert advised.obs_dim == plain.obs_dim + advised.n_actions
    obs, _ = advised.reset(seed=3)
    assert obs
    for agent, o in obs.items():
        tail = o[-advised.n_actions :]
        assert sorted(tail.tolist()) == [0.0] * (advised.n_actions - 1) + [1.0]
        np.testing.assert_array_equal(o[: plain.obs_dim], plain.reset(seed=3)[0][agent])

    class _Envs:
        envs = [advised]

    names = features(_Envs(), advised.obs_dim)
    assert names[-advised.n_actions :] == ["planner advises hold"] + [
        f"planner advises move {a}" for a in range(1, advised.n_actions)
    ]


@pytest.mark.parametrize(("layout", "density", "slots"), [("small", "high", 16), ("large", "medium", 40)])
def test_following_the_advice_taxis_exactly_as_prioritized_planning(layout, density, slots):
    params = TaxiwayParams(layout=layout, density=density, max_slots=slots, advice=True)
    seeds = [11, 12]
    planned = run(Prioritized("pp"), params, seeds)
    followed = run(_FollowAdvice(planned[0].n_actions), params, seeds)
    for a, b in zip(planned, followed, strict=True):
        assert b.sim.t == a.sim.t
        ka, kb = a.episode_info(), b.episode_info()
        for key in ("conflicts", "completed", "completed_pct", "taxi_time_min"):
            assert kb[key] == ka[key], key
        assert kb["completed_pct"] == 100.0 and kb["conflicts"] == 0
        # nobody did otherwise, so only newcomers were planned: one plan per movement that taxied
        assert b.advisor.replans == kb["completed"]


def test_advice_is_replanned_around_an_aircraft_that_does_otherwise_and_stays_allowed():
    params = TaxiwayParams(layout="small", density="high", max_slots=16, advice=True)
    env = TaxiwayEnv(params)
    obs, _ = env.reset(seed=5)
    n = env.n_actions
    checked = masked_out = 0
    disobeyed = False
    while env.agents:
        actions = {}
        for agent, o in obs.items():
            advised = int(np.argmax(o[-n:]))
            checked += 1
            masked_out += not env.action_mask(agent)[advised]
            # the first aircraft always holds, whatever it is told
            actions[agent] = 0 if agent == "ac0" else advised
            disobeyed |= agent == "ac0" and advised != 0
        obs, *_ = env.step(actions)
    assert disobeyed and checked > 100
    assert masked_out == 0  # a masked policy can always take the advised move
    info = env.episode_info()
    assert info["conflicts"] == 0
    assert env.advisor.replans > info["completed"] + 1  # ac0 was re-planned every step it held


def test_train_weights_reward_the_learner_in_training_only():
    """``train_weights`` change the reward a learned policy trains on; validation and held-out episodes
    keep the scenario's weights, so every policy is scored on the same return."""
    from fieldrl.domains.taxiway.domain import TaxiwayDomain

    own = {"safety": 10.0, "efficiency": 1.0, "progress": 0.1}
    params = TaxiwayParams(layout="small", density="high", max_slots=8, train_weights=own)
    domain = TaxiwayDomain()
    train = domain.make_parallel_env(params, training=True)
    held_out = domain.make_parallel_env(params, training=False)
    assert train.params.weights.efficiency == 1.0 and held_out.params.weights.efficiency == 0.1
    for env in (train, held_out):
        env.reset(seed=4)
    steps = 0
    while train.agents and steps < 60:
        actions = {a: 0 for a in train.agents}  # everyone holds: -1.5 efficiency per step
        _, r_train, *_, infos = train.step(actions)
        _, r_held, *_ = held_out.step(actions)
        for agent, terms in infos.items():
            safety, efficiency, progress = (float(x) for x in terms["reward_terms"])
            assert r_train[agent] == pytest.approx(10 * safety + 1.0 * efficiency + 0.1 * progress)
            assert r_held[agent] == pytest.approx(10 * safety + 0.1 * efficiency + 0.1 * progress)
        steps += 1
    assert steps == 60
    with pytest.raises(ValueError, match="train_weights"):
        TaxiwayParams(train_weights={"safety": -1.0})
