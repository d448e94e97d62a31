"""Chemo Gymnasium env, SB3 VecEnv and evaluation batch."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from fieldrl import register_envs
from fieldrl.domains.chemo.env import ChemoEnv, ChemoEvalEnvs, ChemoVecEnv
from fieldrl.domains.chemo.params import ChemoParams
from fieldrl.simulators.chemo import PRESETS


@pytest.mark.parametrize("preset", ["s1", "s5"])
def test_env_passes_gymnasium_and_sb3_checkers(preset: str) -> None:
    gym_check_env(ChemoEnv(preset=preset), skip_render_check=True)
    with warnings.catch_warnings():
        # SB3 recommends a symmetric [-1, 1] action box; DTR-Bench's dose box is [0, 1].
        warnings.simplefilter("ignore", UserWarning)
        sb3_check_env(ChemoEnv(preset=preset), warn=True)


def test_registered_env_is_made_with_kwargs_and_second_register_is_harmless() -> None:
    register_envs()
    register_envs()
    env = gym.make("fieldrl/Chemo-v0", obs_noise=0.2)
    obs, info = env.reset(seed=0)
    assert env.unwrapped.noise.obs_noise == 0.2
    assert obs.shape == (3,) and info["state"].shape == (4,)
    env.close()


def test_preset_supplies_defaults_and_explicit_levels_override() -> None:
    env = ChemoEnv(preset="s4", missing_rate=0.25)
    assert env.noise == PRESETS["s4"].__class__(0.5, 0.2, 0.1, 0.25)
    assert ChemoEnv().noise == PRESETS["s1"]
    with pytest.raises(ValueError):
        ChemoEnv(preset="s9")


def test_params_resolve_preset_and_overrides() -> None:
    assert ChemoParams(preset="s3").noise() == PRESETS["s3"]
    assert ChemoParams(preset="s3", obs_noise=0.0).noise().obs_noise == 0.0
    with pytest.raises(ValueError):
        ChemoParams(obs_noise=1.5)
    with pytest.raises(ValueError):
        ChemoParams(unknown=1)


@pytest.mark.parametrize("preset", ["s1", "s5"])
def test_single_env_and_eval_batch_give_the_same_patient(preset: str) -> None:
    seeds = [11, 5, 99]
    doses = np.random.default_rng(0).random((600, len(seeds))).astype(np.float32)
    evals = ChemoEvalEnvs(seeds, PRESETS[preset])
    batch_obs = [evals.reset()]
    batch_states = [evals.initial_info["state"]]
    for d in doses:
        obs, _, _, _, info = evals.step(d[:, None])
        batch_obs.append(obs)
        batch_states.append(info["state"])
    for i, seed in enumerate(seeds):
        env = ChemoEnv(preset=preset)
        obs, info = env.reset(seed=seed)
        np.testing.assert_array_equal(obs, batch_obs[0][i])
        np.testing.assert_array_equal(info["state"], batch_states[0][i])
        for k, d in enumerate(doses[:, i]):
            obs, _, terminated, truncated, info = env.step(np.array([d], dtype=np.float32))
            np.testing.assert_array_equal(obs, batch_obs[k + 1][i])
            np.testing.assert_array_equal(info["state"], batch_states[k + 1][i])
            if terminated or truncated:
                break
        # finished patients stop changing in the eval batch
        np.testing.assert_array_equal(batch_states[-1][i], info["state"])


def test_eval_batch_reports_dose_and_state_shapes() -> None:
    evals = ChemoEvalEnvs([1, 2], PRESETS["s2"])
    evals.reset()
    assert evals.initial_info["state"].shape == (2, 4)
    _, reward, terminated, truncated, info = evals.step(np.array([[0.3], [2.0]]))
    assert info["state"].shape == (2, 4)
    np.testing.assert_allclose(info["dose"], [0.3, 1.0])
    assert reward.shape == terminated.shape == truncated.shape == (2,)


def _rollout(venv: ChemoVecEnv, steps: int) -> tuple[np.ndarray, list]:
    obs = [venv.reset()]
    infos = []
    rng = np.random.default_rng(0)
    for _ in range(steps):
        o, _, _, info = venv.step(rng.random((venv.num_envs, 1)).astype(np.float32))
        obs.append(o)
        infos.append(info)
    return np.array(obs), infos


def test_vec_env_is_reproducible_and_seed_reseeds() -> None:
    a, _ = _rollout(ChemoVecEnv(4, PRESETS["s4"], seed=3), 50)
    b, _ = _rollout(ChemoVecEnv(4, PRESETS["s4"], seed=3), 50)
    c, _ = _rollout(ChemoVecEnv(4, PRESETS["s4"], seed=4), 50)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    venv = ChemoVecEnv(4, PRESETS["s4"], seed=4)
    venv.seed(3)
    np.testing.assert_array_equal(_rollout(venv, 50)[0], a)
    assert len(set(map(tuple, a[0]))) == 4  # different patients per env


def test_vec_env_autoresets_with_terminal_observation() -> None:
    max_t = 20
    venv = ChemoVecEnv(3, PRESETS["s1"], max_t=max_t, seed=0)
    first = venv.reset()
    zeros = np.zeros((3, 1), dtype=np.float32)
    for _ in range(max_t - 1):
        _, _, dones, infos = venv.step(zeros)
        assert not dones.any()
        assert not any(i["TimeLimit.truncated"] for i in infos)
    obs, _, dones, infos = venv.step(zeros)
    assert dones.all()
    for i in range(3):
        assert infos[i]["TimeLimit.truncated"]
        assert infos[i]["terminal_observation"].shape == (3,)
        assert not np.array_equal(infos[i]["terminal_observation"], obs[i])
        np.testing.assert_array_equal(obs[i], first[i])  # s1: every new patient is nominal
    assert venv.env_is_wrapped(gym.Wrapper) == [False] * 3
    assert venv.get_attr("max_t") == [max_t] * 3


def test_vec_env_death_is_not_a_time_limit_truncation() -> None:
    venv = ChemoVecEnv(2, PRESETS["s1"], seed=0)
    venv.reset()
    for _ in range(600):
        _, rewards, dones, infos = venv.step(np.zeros((2, 1), dtype=np.float32))
        if dones.any():
            break
    assert dones.all() and (rewards == -100).all()
    assert not any(i["TimeLimit.truncated"] for i in infos)
    assert all("terminal_observation" in i for i in infos)


def test_missing_observations_repeat_the_previous_one_at_the_configured_rate() -> None:
    env = ChemoEnv(missing_rate=0.5)
    prev, _ = env.reset(seed=0)
    repeats = 0
    for _ in range(400):
        obs, *_ = env.step(np.array([0.5], dtype=np.float32))
        repeats += bool(np.array_equal(obs, prev))
        prev = obs
    assert 0.4 < repeats / 400 < 0.6
    env = ChemoEnv()
    prev, _ = env.reset(seed=0)
    obs, *_ = env.step(np.array([0.5], dtype=np.float32))
    assert not np.array_equal(obs, prev)
