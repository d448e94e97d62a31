"""The dispatcher's advice in the rail env's observation (``advice``): a learned policy anchored on it."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test
from pydantic import ValidationError

from fieldrl.domains.rail.env import ADVICE_SIZE, DISPATCH, NOOP, ROUTE, RailParallelEnv
from fieldrl.domains.rail.heuristics import ReservationDispatcher
from fieldrl.domains.rail.observation import OBS_SIZE
from fieldrl.domains.rail.params import RailParams
from fieldrl.domains.rail.reservation import EpisodePlan
from fieldrl.errors import ScenarioError
from fieldrl.scenario import load_scenario


def _priority_reroute() -> ReservationDispatcher:
    """The priority dispatcher with its defaults, bound to one env by hand (as ``bind_envs`` does)."""
    return ReservationDispatcher("priority reroute", k=4, order="slack", cancel_late=True)


def _follow_advice(level: int, seed: int, shield: bool) -> dict[str, float]:
    env = RailParallelEnv(level=level, shield=shield, advice=True)
    env.reset(seed=seed)
    while env.agents:
        advised = env.advised_actions()
        env.step({a: int(advised[env.index[a]]) for a in env.agents})
    return env.episode_info()


def _dispatch(level: int, seed: int) -> dict[str, float]:
    env = RailParallelEnv(level=level)
    env.reset(seed=seed)
    dispatcher = _priority_reroute()
    dispatcher.plans, dispatcher._paths = [EpisodePlan(env)], [{}]
    while env.agents:
        chosen = dispatcher.decide(0, env)
        env.step({env.names[i]: a for i, a in chosen.items()})
    return env.episode_info()


@pytest.mark.parametrize(("level", "seed"), [(1, 10000), (2, 10001), (3, 10002)])
@pytest.mark.parametrize("shield", [True, False])
def test_a_policy_that_always_follows_the_advice_is_the_priority_dispatcher(level, seed, shield):
    followed = _follow_advice(level, seed, shield)
    dispatched = _dispatch(level, seed)
    assert followed == dispatched
    assert 0 < followed["arrived"] < 100  # some trains arrived and some did not: the decisions mattered
    assert followed["cancelled"] > 0 or followed["delay"] > 0


def test_the_dispatchers_demonstrations_show_their_own_decision_as_advice():
    """A warm start clones the dispatcher in an advice env with the shield off (dispatchers run
    unshielded): its every decision must be the advice the clone sees beside it."""
    env = RailParallelEnv(level=2, shield=True, advice=True)
    env.reset(seed=7)
    env.disable_shield()  # as the dispatcher's bind_envs does
    dispatcher = _priority_reroute()
    dispatcher.plans, dispatcher._paths = [EpisodePlan(env)], [{}]
    decisions = 0
    while env.agents:
        obs = env.observe_all()
        chosen = dispatcher.decide(0, env)
        for i, action in chosen.items():
            assert np.argmax(obs[i, OBS_SIZE:]) == action
            decisions += 1
        env.step({env.names[i]: a for i, a in chosen.items()})
    assert decisions > 50


def test_advice_observation_is_a_one_hot_of_the_pending_decision():
    env = RailParallelEnv(level=1, shield=True, advice=True)
    obs, _ = env.reset(seed=3)
    assert env.observation_space(env.possible_agents[0]).shape == (OBS_SIZE + ADVICE_SIZE,)
    seen_kinds = set()
    for _ in range(40):
        if not env.agents:
            break
        full = env.observe_all()
        advice = full[:, OBS_SIZE:]
        assert np.all(advice.sum(axis=1) == 1.0)
        advised = advice.argmax(axis=1)
        for i in range(env.n):
            mask = env.action_mask(env.names[i])
            if env.pending[i] == NOOP:
                assert advised[i] == NOOP
            else:
                seen_kinds.add(int(env.pending[i]))
                assert mask[advised[i]], "the shield never forbids what the dispatcher advises"
        env.step({env.names[i]: int(advised[i]) for i in range(env.n) if env.names[i] in env.agents})
    assert seen_kinds == {DISPATCH, ROUTE}
    plain = RailParallelEnv(level=1, shield=True)
    plain.reset(seed=3)
    assert plain.observation_space(plain.possible_agents[0]).shape == (OBS_SIZE,)


def test_advice_env_passes_pettingzoo_conformance():
    parallel_api_test(RailParallelEnv(level=0, shield=True, advice=True), num_cycles=300)
    parallel_seed_test(lambda: RailParallelEnv(level=0, shield=True, advice=True))


def test_advice_is_refused_in_monolithic_mode():
    with pytest.raises(ValidationError, match="advice applies to mode 'semi' only"):
        RailParams.model_validate({"mode": "monolithic", "advice": True})


def test_an_advised_entry_in_a_monolithic_setting_is_refused(tmp_path):
    text = tmp_path / "s.yaml"
    text.write_text(
        """
name: advice-check
domain: rail
variants:
  semi: {level: 0, shield: true}
  mono: {level: 0, mode: monolithic}
policies:
  heuristics: [{use: priority-reroute}]
  learned:
    - {algorithm: maskable-ppo, name: advised, params: {advice: true}, train_steps: 1000}
seeds: {train: {start: 0, count: 1}, eval: {start: 100, count: 2}}
"""
    )
    with pytest.raises(ScenarioError) as err:
        load_scenario(text)
    assert "policies.learned[0].params" in str(err.value)
    assert "advice applies to mode 'semi' only" in str(err.value)


@pytest.mark.parametrize("share", [0.5, 1.0])
def test_team_reward_mixes_each_trains_reward_with_the_teams_mean(share):
    """Same seed, same decisions (the advice): the team env's rewards are the own-reward env's,
    mixed with their sum over all trains divided by the number of trains."""
    own_env = RailParallelEnv(level=1, shield=True, advice=True)
    team_env = RailParallelEnv(level=1, shield=True, advice=True, team_reward=share)
    own_env.reset(seed=11)
    team_env.reset(seed=11)
    steps_with_rewards = 0
    while own_env.agents:
        advised = own_env.advised_actions()
        acts = {a: int(advised[own_env.index[a]]) for a in own_env.agents}
        _, own, _, _, _ = own_env.step(acts)
        _, team, _, _, _ = team_env.step(acts)
        assert team.keys() == own.keys()
        mean = sum(own.values()) / own_env.n
        for agent in own:
            assert team[agent] == pytest.approx((1 - share) * own[agent] + share * mean)
        if share == 1.0:
            assert len(set(team.values())) == 1
        steps_with_rewards += any(r != 0 for r in own.values())
    assert steps_with_rewards > 5
    assert team_env.episode_info() == own_env.episode_info()


def test_team_reward_outside_zero_to_one_is_refused():
    with pytest.raises(ValidationError, match="team_reward"):
        RailParams.model_validate({"team_reward": 1.5})
    with pytest.raises(ValueError, match="team_reward must be within"):
        RailParallelEnv(team_reward=-0.1)
