"""Behaviour cloning on single-agent domains: chemo doses (Box) into on- and off-policy learners,
wealth choices (MultiDiscrete) into PPO and MaskablePPO, and what cannot be cloned."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import stable_baselines3 as sb3
import torch
from sb3_contrib import TQC, TRPO, MaskablePPO, RecurrentPPO
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from fieldrl.domains.chemo import DOMAIN as CHEMO
from fieldrl.domains.chemo.params import ChemoParams
from fieldrl.domains.memory import DOMAIN as MEMORY
from fieldrl.domains.memory.domain import MemoryParams
from fieldrl.domains.wealth import DOMAIN as WEALTH
from fieldrl.domains.wealth.heuristics import ProblemObs
from fieldrl.domains.wealth.params import WealthParams
from fieldrl.policies.imitation import IMITABLE, add_to_replay_buffer, clone, collect

#: short s1 episodes: the tumour-feedback rule still doses (mean dose ~0.7), so an untrained
#: policy is far from it
CHEMO_PARAMS = ChemoParams(preset="s1", max_t=120)
GAMMA = 0.99
OFF_POLICY = {"sac": sb3.SAC, "td3": sb3.TD3, "ddpg": sb3.DDPG, "tqc": TQC}
ON_POLICY = {"ppo": sb3.PPO, "a2c": sb3.A2C, "trpo": TRPO}


def _heuristic(domain: Any, params: Any, use: str, **settings: Any) -> Any:
    spec = domain.heuristics[use]
    return spec.build(spec.settings_model(**settings), params, use)


class Recording:
    """Forwards to a heuristic and remembers what it was given."""

    def __init__(self, inner: Any):
        self.inner, self.name = inner, inner.name
        self.bound: Any = None
        self.obs_types: set[type] = set()

    def reset(self, n_envs: int) -> None:
        self.inner.reset(n_envs)

    def bind_envs(self, envs: Any) -> None:
        self.bound = envs

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        self.obs_types.add(type(obs))
        return self.inner.act(obs, episode_start)


def _chemo_demos(seeds: list[int]):
    return collect(
        CHEMO.make_eval_envs(CHEMO_PARAMS, seeds), _heuristic(CHEMO, CHEMO_PARAMS, "tumour-feedback"), GAMMA
    )


def _episodes(demos) -> list[slice]:
    ends = np.flatnonzero(demos.terminated | demos.truncated) + 1
    return [slice(lo, hi) for lo, hi in zip(np.r_[0, ends[:-1]], ends, strict=True)]


def test_single_agent_demonstrations_are_every_decision_with_its_return_and_transition():
    heuristic = Recording(_heuristic(CHEMO, CHEMO_PARAMS, "tumour-feedback"))
    envs = CHEMO.make_eval_envs(CHEMO_PARAMS, [1, 2, 3])
    demos = collect(envs, heuristic, GAMMA)
    assert heuristic.bound is envs and demos.episodes == 3
    episodes = _episodes(demos)
    assert len(episodes) == 3 and len(demos) == 3 * 120  # nobody dies in 30 days of s1
    assert demos.truncated.sum() == 3 and not demos.terminated.any()
    # the recorded action is what the (stateless) rule does on the recorded observation
    np.testing.assert_array_equal(demos.actions, heuristic.inner.act(demos.obs, np.zeros(len(demos), bool)))
    assert demos.masks.all() and demos.masks.shape == (len(demos), 1)
    for ep in episodes:
        obs, nxt, r, g = demos.obs[ep], demos.next_obs[ep], demos.rewards[ep], demos.returns[ep]
        np.testing.assert_array_equal(nxt[:-1], obs[1:])  # consecutive steps of one patient
        np.testing.assert_allclose(g[:-1], r[:-1] + GAMMA * g[1:], rtol=1e-4, atol=1e-3)
        assert g[-1] == pytest.approx(r[-1])
    assert len(demos.all_obs) == len(demos) and len(demos.running_returns) == len(demos)
    # sampling keeps transitions aligned with their decisions
    kept = demos.sample(50, seed=0)
    rows = {tuple(r) for r in np.column_stack([demos.obs, demos.next_obs, demos.actions]).round(5)}
    assert all(tuple(r) in rows for r in np.column_stack([kept.obs, kept.next_obs, kept.actions]).round(5))


def test_stateful_heuristic_on_gymnasium_lockstep_envs_gets_its_episode_starts():
    params = MemoryParams(delay=3)
    demos = collect(
        MEMORY.make_eval_envs(params, [0, 1, 2, 3]), _heuristic(MEMORY, params, "remember-cue"), 0.5
    )
    assert len(demos) == 4 * 4 and demos.terminated.sum() == 4
    for ep in _episodes(demos):
        cue = np.sign(demos.obs[ep][0, 0])
        assert (demos.actions[ep] == cue).all()  # remembered after the cue vanished
        assert demos.rewards[ep][-1] == 1.0 and (demos.rewards[ep][:-1] == 0).all()
        np.testing.assert_allclose(demos.returns[ep], [0.125, 0.25, 0.5, 1.0])


def test_wealth_observations_reach_the_heuristic_with_their_problems():
    params = WealthParams(random=True)
    dp = Recording(_heuristic(WEALTH, params, "dp", grid_density=0.5))  # needs ProblemObs to act
    demos = collect(WEALTH.make_eval_envs(params, [1, 2]), dp, 1.0)
    assert dp.obs_types == {ProblemObs}
    assert type(demos.obs) is np.ndarray and demos.actions.dtype == np.int64 and demos.actions.shape[1] == 2


def _deterministic_error(model: Any, venv: VecNormalize, demos) -> float:
    actions, _ = model.predict(venv.normalize_obs(demos.obs).astype(np.float32), deterministic=True)
    return float(np.abs(actions - demos.actions).mean())


@pytest.mark.parametrize("name", [*ON_POLICY, *OFF_POLICY])
def test_cloning_makes_the_deterministic_dose_the_rules_on_unseen_patients(name):
    torch.set_num_threads(1)
    demos, unseen = _chemo_demos(list(range(8))), _chemo_demos([100, 101, 102])
    venv = VecNormalize(CHEMO.make_train_vec_env(CHEMO_PARAMS, 2, 0), gamma=GAMMA)
    algo = {**ON_POLICY, **OFF_POLICY}[name]
    kwargs = {"buffer_size": 2000} if name in OFF_POLICY else {}
    model = algo("MlpPolicy", venv, seed=0, device="cpu", gamma=GAMMA, **kwargs)
    before = _deterministic_error(model, venv, unseen)
    stats = clone(model, venv, demos, epochs=20, seed=0)
    after = _deterministic_error(model, venv, unseen)
    assert stats["decisions"] == len(demos) and stats["action_error"] < 0.06
    assert after < 0.06 and before > 0.15, (before, after)
    # the critic ranks states (and the demonstrated actions) by what the rule went on to collect
    obs = torch.as_tensor(venv.normalize_obs(unseen.obs).astype(np.float32))
    with torch.no_grad():
        if name in ON_POLICY:
            values = model.policy.predict_values(obs).flatten().numpy()
        else:
            act = torch.as_tensor(model.policy.scale_action(unseen.actions).astype(np.float32))
            q = model.policy.critic(obs, act)
            values = (torch.cat(q, 1) if isinstance(q, tuple) else q.flatten(1)).mean(1).numpy()
            # targets start equal to the fitted networks
            for a, b in zip(
                model.policy.critic.parameters(), model.policy.critic_target.parameters(), strict=True
            ):
                assert torch.equal(a, b)
            if hasattr(model.policy, "actor_target"):
                assert torch.equal(model.policy.actor(obs), model.policy.actor_target(obs))
    assert np.corrcoef(values, unseen.returns)[0, 1] > 0.8
    # statistics were warmed up on the demonstrations: observations and the return scale
    assert venv.obs_rms.count > len(demos.all_obs) and venv.ret_rms.count > len(demos)


def test_on_policy_cloning_keeps_the_exploration_noise_unless_asked():
    demos = _chemo_demos([1, 2])
    venv = CHEMO.make_train_vec_env(CHEMO_PARAMS, 1, 0)
    kept, fitted = (sb3.PPO("MlpPolicy", venv, seed=0, device="cpu") for _ in range(2))
    clone(kept, venv, demos, epochs=10, batch_size=32)
    clone(fitted, venv, demos, epochs=10, batch_size=32, fit_log_std=True)
    assert kept.policy.log_std.item() == 0.0  # PPO's initial std of 1 is left for RL to explore with
    assert fitted.policy.log_std.item() < -0.05  # maximum likelihood narrows it towards the cloning error


def test_off_policy_replay_buffer_starts_with_the_demonstrations():
    demos = _chemo_demos([4, 5])
    venv = CHEMO.make_train_vec_env(CHEMO_PARAMS, 4, 0)
    model = sb3.SAC("MlpPolicy", venv, seed=0, device="cpu", buffer_size=1000)
    stats = clone(model, venv, demos, epochs=1)
    buffer = model.replay_buffer
    assert stats["replay_transitions"] == len(demos) == buffer.pos * buffer.n_envs  # 240 = 60 rows x 4 envs
    rows = slice(0, buffer.pos)
    np.testing.assert_array_equal(buffer.observations[rows].reshape(-1, 3), demos.obs)  # raw, in order
    np.testing.assert_array_equal(buffer.next_observations[rows].reshape(-1, 3), demos.next_obs)
    np.testing.assert_allclose(buffer.actions[rows].reshape(-1, 1), 2 * demos.actions - 1, atol=1e-6)
    np.testing.assert_allclose(buffer.rewards[rows].reshape(-1), demos.rewards)
    ends = buffer.dones[rows].reshape(-1) > 0
    np.testing.assert_array_equal(ends, demos.truncated)  # time-limit ends ...
    assert (buffer.timeouts[rows].reshape(-1)[ends] > 0).all()  # ... are bootstrapped through
    # buffers are filled n_envs rows at a time: a remainder is left out
    assert add_to_replay_buffer(model, demos.sample(len(demos) - 3, seed=0)) == len(demos) - 4


def test_cloning_a_glide_path_into_multi_discrete_choices_reaches_high_accuracy():
    params = WealthParams(benchmark=4, max_levels=1)
    rule = _heuristic(WEALTH, params, "glide-path", target="next-goal", span=4)
    demos = collect(WEALTH.make_eval_envs(params, list(range(64))), rule, 1.0)
    unseen = collect(WEALTH.make_eval_envs(params, list(range(1000, 1032))), rule, 1.0)
    for algo in (sb3.PPO, MaskablePPO):
        venv = VecNormalize(WEALTH.make_train_vec_env(params, 2, 0), norm_obs=False, gamma=1.0)
        model = algo("MlpPolicy", venv, seed=0, device="cpu", gamma=1.0)

        def accuracy(model=model) -> float:
            actions, _ = model.predict(unseen.obs, deterministic=True)
            return float((actions == unseen.actions).all(axis=1).mean())

        before = accuracy()
        stats = clone(model, venv, demos, epochs=60, learning_rate=3e-3, seed=0)
        assert before < 0.1 and stats["accuracy"] >= 0.95 and accuracy() >= 0.95, (algo, before, stats)


def test_algorithms_that_cannot_be_cloned_are_named():
    demos = _chemo_demos([1])
    cartpole = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    with pytest.raises(ValueError, match="cannot behaviour-clone DQN.*supported: PPO"):
        clone(sb3.DQN("MlpPolicy", cartpole, device="cpu", buffer_size=10), cartpole, demos, epochs=1)
    venv = CHEMO.make_train_vec_env(CHEMO_PARAMS, 1, 0)
    with pytest.raises(ValueError, match="RecurrentPPO"):
        clone(RecurrentPPO("MlpLstmPolicy", venv, device="cpu"), venv, demos, epochs=1)
    with pytest.raises(ValueError, match="epochs"):
        clone(sb3.PPO("MlpPolicy", venv, device="cpu"), venv, demos, epochs=0)
    assert {"ppo", "maskable-ppo", "a2c", "sac", "td3", "ddpg", "tqc"} <= set(IMITABLE)
    assert "dqn" not in IMITABLE and "recurrent-ppo" not in IMITABLE
