"""Residual policies on chemo doses: a zero correction is exactly the heuristic, a full correction
moves the dose by the bounded amount, evaluation matches training, and SAC trains on the wrapper."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import stable_baselines3 as sb3
import torch
from sb3_contrib import TQC, TRPO, MaskablePPO, RecurrentPPO
from stable_baselines3.common.vec_env import VecNormalize

from fieldrl.domains.chemo import DOMAIN as CHEMO
from fieldrl.domains.chemo.params import ChemoParams
from fieldrl.domains.memory import DOMAIN as MEMORY
from fieldrl.domains.memory.domain import MemoryParams
from fieldrl.domains.wealth import DOMAIN as WEALTH
from fieldrl.domains.wealth.params import WealthParams
from fieldrl.evaluation.runner import run_episodes
from fieldrl.policies.base import Policy
from fieldrl.policies.learned import SB3Policy
from fieldrl.policies.lstm_td3 import LSTMTD3
from fieldrl.policies.residual import ResidualPolicy, ResidualVecEnv, zero_correction

#: 30-step episodes: a 100-step run crosses episode ends, where stateful rules must restart (the
#: pulsed cycle is 7 steps, so a restart shows)
PARAMS = ChemoParams(preset="s3", max_t=30)
RULES = {"tumour-feedback": {}, "pulsed": {"dose": 0.8, "on_days": 1.0, "off_days": 0.75}}


def _heuristic(use: str, domain: Any = CHEMO, params: Any = PARAMS) -> Any:
    spec = domain.heuristics[use]
    return spec.build(spec.settings_model(**RULES.get(use, {})), params, use)


class Constant(Policy):
    """A correction policy that always answers ``value``."""

    name = "constant correction"

    def __init__(self, value: float):
        self.value = value

    def reset(self, n_envs: int) -> None:
        pass

    def act(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        return np.full((len(obs), 1), self.value, dtype=np.float32)


@pytest.mark.parametrize("algo", [sb3.PPO, sb3.SAC])
@pytest.mark.parametrize("use", list(RULES))
def test_zero_correction_reproduces_the_heuristics_doses_exactly(use, algo):
    residual = VecNormalize(ResidualVecEnv(CHEMO.make_train_vec_env(PARAMS, 3, 7), _heuristic(use), 0.5))
    model = zero_correction(algo("MlpPolicy", residual, seed=0, device="cpu"))
    residual.seed(7)  # SB3 re-seeded the env with the model's seed
    plain, rule = CHEMO.make_train_vec_env(PARAMS, 3, 7), _heuristic(use)
    obs, raw = residual.reset(), plain.reset()
    rule.reset(3)
    start = np.ones(3, dtype=bool)
    for _ in range(100):
        correction, _ = model.predict(obs, deterministic=True)
        assert (correction == 0).all()
        dose = rule.act(raw, start)
        obs, _, _, infos = residual.step(correction)
        raw, _, start, plain_infos = plain.step(dose)
        np.testing.assert_array_equal(residual.venv.env_actions, dose)  # float32 -> float64, nothing added
        np.testing.assert_array_equal(residual.get_original_obs(), raw)  # the same patients, step by step
        assert [i["dose"] for i in infos] == [i["dose"] for i in plain_infos]


def test_a_full_correction_moves_the_dose_by_the_scale_and_stays_in_bounds():
    env = ResidualVecEnv(CHEMO.make_train_vec_env(PARAMS, 4, 3), _heuristic("pulsed"), 0.6)  # doses 0.8 or 0
    env.reset()
    clipped = set()
    for step in range(12):
        c = [1.0, -1.0, 0.5, 7.0][step % 4]  # beyond +-1 counts as +-1
        _, _, _, infos = env.step(np.full((4, 1), c, dtype=np.float32))
        h = env.heuristic_actions[:, 0]
        moved = h + 0.6 * 0.5 * np.clip(c, -1, 1)  # action range 1: a correction of 1 moves 0.3
        np.testing.assert_allclose([i["dose"] for i in infos], np.clip(moved, 0.0, 1.0), atol=1e-7)
        clipped |= {"high" for m in moved if m > 1} | {"low" for m in moved if m < 0}
    assert clipped == {"high", "low"}  # 0.8 + 0.3 and 0 - 0.3 both met the bounds
    assert env.action_space.low.tolist() == [-1.0] and env.action_space.high.tolist() == [1.0]


def test_zero_corrected_residual_policy_scores_the_heuristics_kpis_exactly():
    seeds = [200, 201, 202, 203]
    heuristic_kpis, _ = run_episodes(CHEMO, PARAMS, _heuristic("pulsed"), seeds, trace_index=None)
    train = VecNormalize(ResidualVecEnv(CHEMO.make_train_vec_env(PARAMS, 2, 0), _heuristic("pulsed"), 0.5))
    train.reset()
    model = zero_correction(sb3.TD3("MlpPolicy", train, seed=0, device="cpu", buffer_size=10))
    rms = train.obs_rms  # non-trivial statistics: the correction network sees normalised inputs
    norm = {"mean": rms.mean.tolist(), "var": rms.var.tolist(), "clip_obs": 10.0, "epsilon": 1e-8}
    low, high = CHEMO.make_env(PARAMS).action_space.low, CHEMO.make_env(PARAMS).action_space.high

    def residual(correction: Any) -> dict[str, np.ndarray]:
        policy = ResidualPolicy("residual", _heuristic("pulsed"), correction, 0.5, low, high)
        return run_episodes(CHEMO, PARAMS, policy, seeds, trace_index=None)[0]

    kpis = residual(SB3Policy("correction", model, norm))
    assert kpis.keys() == heuristic_kpis.keys()
    for name, values in heuristic_kpis.items():
        np.testing.assert_array_equal(kpis[name], values, err_msg=name)
    more = residual(Constant(1.0))  # a full upward correction gives more drug
    assert (more["total_dose"] > heuristic_kpis["total_dose"]).all()


def test_residual_policy_forwards_reset_and_bind_to_both_parts():
    calls: list[tuple[str, Any]] = []

    class Part(Constant):
        def __init__(self, tag: str):
            super().__init__(0.0)
            self.tag = tag

        def reset(self, n_envs: int) -> None:
            calls.append((self.tag, n_envs))

        def bind_envs(self, envs: Any) -> None:
            calls.append((self.tag, envs))

    policy = ResidualPolicy("r", Part("h"), Part("c"), 1.0, [0.0], [1.0])
    policy.reset(3)
    policy.bind_envs("envs")
    assert calls == [("h", 3), ("c", 3), ("h", "envs"), ("c", "envs")]
    assert policy.act(np.zeros((2, 3)), np.ones(2, bool)).dtype == np.float32


@pytest.mark.parametrize(
    "algo", [sb3.PPO, sb3.A2C, TRPO, RecurrentPPO, sb3.SAC, TQC, sb3.TD3, sb3.DDPG, LSTMTD3]
)
def test_zero_correction_zeroes_every_algorithms_deterministic_action(algo):
    env = ResidualVecEnv(MEMORY.make_train_vec_env(MemoryParams(), 1, 0), _heuristic("constant", MEMORY), 1.0)
    kwargs = {"buffer_size": 10} if algo in (sb3.SAC, TQC, sb3.TD3, sb3.DDPG, LSTMTD3) else {}
    policy = {RecurrentPPO: "MlpLstmPolicy", LSTMTD3: "MlpLstmPolicy"}.get(algo, "MlpPolicy")
    model = algo(policy, env, seed=0, device="cpu", **kwargs)
    obs = np.random.default_rng(0).uniform(-3, 3, size=(64, 2)).astype(np.float32)
    assert np.abs(model.predict(obs, deterministic=True)[0]).max() > 1e-3
    zero_correction(model)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], 0.0)
    if hasattr(model.policy, "actor_target"):  # target actions are zero too
        target = model.policy.actor_target.state_dict()
        assert all(torch.equal(v, target[k]) for k, v in model.policy.actor.state_dict().items())


def test_sac_trains_on_the_residual_wrapper_and_leaves_zero():
    torch.set_num_threads(1)
    env = VecNormalize(
        ResidualVecEnv(CHEMO.make_train_vec_env(PARAMS, 4, 0), _heuristic("tumour-feedback"), 0.5)
    )
    model = zero_correction(
        sb3.SAC("MlpPolicy", env, seed=0, device="cpu", learning_starts=40, batch_size=64, buffer_size=1000)
    )
    obs = env.normalize_obs(np.array([[0.5, 0.2, 0.1], [0.05, 0.3, 0.8]], dtype=np.float32))
    before = [p.detach().clone() for p in model.policy.actor.parameters()]
    model.learn(400)
    assert model.num_timesteps == 400 and model.replay_buffer.pos == 100
    stored = model.replay_buffer.actions[:100]
    assert stored.min() >= -1 and stored.max() <= 1  # corrections, not doses, were learned from
    after = list(model.policy.actor.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert np.abs(model.predict(obs, deterministic=True)[0]).max() > 0  # gradient steps moved it off zero


def test_only_box_actions_have_a_residual():
    wealth = WEALTH.make_train_vec_env(WealthParams(benchmark=4, max_levels=1), 1, 0)
    with pytest.raises(ValueError, match="Box"):
        ResidualVecEnv(wealth, _heuristic("glide-path", WEALTH, WealthParams(benchmark=4)), 0.5)
    with pytest.raises(ValueError, match="Box"):
        zero_correction(MaskablePPO("MlpPolicy", wealth, device="cpu"))
    with pytest.raises(ValueError, match="positive"):
        ResidualVecEnv(CHEMO.make_train_vec_env(PARAMS, 1, 0), _heuristic("pulsed"), 0.0)
