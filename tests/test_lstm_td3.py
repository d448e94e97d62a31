"""LSTM-TD3: history sampling never crosses episodes, predict carries per-env windows, save/load."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from fieldrl.domains.memory import DOMAIN as MEMORY
from fieldrl.domains.memory.env import MemoryEnv
from fieldrl.evaluation.runner import run_episodes
from fieldrl.policies.learned import MODEL_FILE, NORM_FILE, load_policy, train_model
from fieldrl.policies.lstm_td3 import LSTMTD3, HistoryReplayBuffer
from fieldrl.policies.registry import ALGORITHMS
from fieldrl.scenario import LearnedEntry

OBS = spaces.Box(-1e6, 1e6, shape=(2,), dtype=np.float32)
ACT = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
SMALL = {"net_arch": [16], "pre_lstm_arch": [8], "feature_arch": [8]}


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny networks on a busy 2-core machine: extra torch threads only contend."""
    before = th.get_num_threads()
    th.set_num_threads(1)
    yield
    th.set_num_threads(before)


def fill(buffer: HistoryReplayBuffer, episode_lengths: list[list[int]], steps: int) -> None:
    """Add ``steps`` rows; env ``e`` runs episodes of the given lengths (cycled).

    Observation of env ``e`` at global step ``k``: ``[1000 e + k, episode number]``;
    the action stored is ``-(1000 e + k)``, so every value names its env and step.
    """
    n = buffer.n_envs
    episode = np.zeros(n, dtype=int)
    t_in_episode = np.zeros(n, dtype=int)
    for k in range(steps):
        obs = np.array([[1000 * e + k, episode[e]] for e in range(n)], dtype=np.float32)
        next_obs = obs + np.array([1, 0], dtype=np.float32)
        dones = np.zeros(n, dtype=bool)
        for e in range(n):
            lengths = episode_lengths[e]
            dones[e] = t_in_episode[e] + 1 == lengths[episode[e] % len(lengths)]
        buffer.add(obs, next_obs, -obs[:, :1], np.zeros(n), dones, [{} for _ in range(n)])
        t_in_episode = np.where(dones, 0, t_in_episode + 1)
        episode = episode + dones


def check_histories(buffer: HistoryReplayBuffer, rows: np.ndarray, envs: np.ndarray) -> None:
    """Every history pair belongs to the sampled transition's env and episode and precedes it."""
    s = buffer._get_samples(rows, env_indices=envs)
    obs = s.observations.numpy()
    hl = buffer.history_length
    for which in ("history", "next_history"):
        h_obs = getattr(s, f"{which}_observations").numpy()
        h_act = getattr(s, f"{which}_actions").numpy()
        lengths = getattr(s, f"{which}_lengths").numpy()
        for i in range(len(rows)):
            n_real = lengths[i]
            assert 0 <= n_real <= hl
            real, pad = h_obs[i, :n_real], h_obs[i, n_real:]
            assert not pad.any() and not h_act[i, n_real:].any()  # zero padding after the real pairs
            np.testing.assert_array_equal(h_act[i, :n_real, 0], -real[:, 0])  # pairs stay together
            assert (real[:, 1] == obs[i, 1]).all(), "history crossed an episode boundary"
            assert (real[:, 0] // 1000 == obs[i, 0] // 1000).all(), "history crossed into another env"
            # consecutive steps ending just before t (history) or at t (next history)
            last = obs[i, 0] - (1 if which == "history" else 0)
            np.testing.assert_array_equal(real[:, 0], np.arange(last - n_real + 1, last + 1))
    np.testing.assert_array_equal(
        s.next_history_lengths.numpy(), np.minimum(s.history_lengths.numpy() + 1, hl)
    )
    assert s.history_mask.sum().item() == s.history_lengths.sum().item()


def test_history_lengths_follow_episode_starts_and_pad_with_zeros():
    buffer = HistoryReplayBuffer(100, OBS, ACT, device="cpu", n_envs=1, history_length=3)
    fill(buffer, [[2, 5]], 7)  # episodes: steps 0-1, 2-6
    s = buffer._get_samples(np.arange(7), env_indices=np.zeros(7, dtype=int))
    assert s.history_lengths.tolist() == [0, 1, 0, 1, 2, 3, 3]
    assert s.next_history_lengths.tolist() == [1, 2, 1, 2, 3, 3, 3]
    # step 5 of episode 2: pairs of steps 2, 3, 4 (oldest first); its next history adds step 5
    np.testing.assert_array_equal(s.history_observations[5, :, 0].numpy(), [2, 3, 4])
    np.testing.assert_array_equal(s.next_history_observations[5, :, 0].numpy(), [3, 4, 5])
    # step 3: one real pair (step 2), then zeros; mask marks it
    np.testing.assert_array_equal(s.history_observations[3, :, 0].numpy(), [2, 0, 0])
    assert s.history_mask[3].tolist() == [True, False, False]
    check_histories(buffer, np.arange(7), np.zeros(7, dtype=int))


def test_histories_stay_in_their_env_and_episode_with_two_envs_and_wraparound():
    buffer = HistoryReplayBuffer(2 * 11, OBS, ACT, device="cpu", n_envs=2, history_length=4)
    fill(buffer, [[3, 7, 2], [5, 1, 6]], 37)  # wraps the 11-row ring three times
    assert buffer.full
    rows, envs = np.meshgrid(np.arange(11), np.arange(2), indexing="ij")
    check_histories(buffer, rows.ravel(), envs.ravel())
    # the oldest stored row (pos) cannot look back: its predecessors were overwritten
    oldest = buffer._get_samples(np.array([buffer.pos]), env_indices=np.array([0]))
    assert oldest.history_lengths.item() == 0
    sampled = buffer.sample(64)
    assert sampled.history_observations.shape == (64, 4, 2)
    assert sampled.history_actions.shape == (64, 4, 1)


def test_new_learn_call_starts_new_episodes_in_the_buffer():
    buffer = HistoryReplayBuffer(50, OBS, ACT, device="cpu", n_envs=1, history_length=3)
    fill(buffer, [[100]], 4)
    buffer.start_new_episodes()
    fill(buffer, [[100]], 2)
    assert buffer.history_lengths(np.array([4, 5]), np.array([0, 0])).tolist() == [0, 1]


def test_histories_are_normalized_like_observations_and_padding_stays_zero():
    venv = VecNormalize(DummyVecEnv([lambda: MemoryEnv(delay=3)]))
    venv.obs_rms.mean[:] = 5.0
    buffer = HistoryReplayBuffer(20, OBS, ACT, device="cpu", n_envs=1, history_length=3)
    fill(buffer, [[10]], 4)
    s = buffer._get_samples(np.array([1]), env=venv, env_indices=np.array([0]))
    np.testing.assert_allclose(s.history_observations[0, 0].numpy(), venv.normalize_obs(np.zeros(2)))
    assert not s.history_observations[0, 1:].any()


def small_model(env, **kwargs) -> LSTMTD3:
    return LSTMTD3(
        "MlpLstmPolicy",
        env,
        history_length=3,
        lstm_hidden_size=8,
        policy_kwargs=SMALL,
        learning_starts=20,
        batch_size=16,
        seed=0,
        device="cpu",
        **kwargs,
    )


def test_predict_keeps_one_window_per_env_and_episode_start_resets_only_that_env():
    model = small_model(DummyVecEnv([lambda: MemoryEnv(delay=3)]))
    rng = np.random.default_rng(0)
    obs = [rng.normal(size=(3, 2)).astype(np.float32) for _ in range(4)]
    starts = np.ones(3, dtype=bool)
    state = None
    for o in obs:
        actions, state = model.predict(o, state=state, episode_start=starts)
        starts = np.zeros(3, dtype=bool)
    assert actions.shape == (3, 1) and state.lengths.tolist() == [3, 3, 3]
    np.testing.assert_array_equal(state.observations[1], np.stack([o[1] for o in obs[1:]]))

    fresh = obs[0]
    reset_one = np.array([False, True, False])
    a_reset, state_reset = model.predict(fresh, state=state, episode_start=reset_one)
    assert state_reset.lengths.tolist() == [3, 1, 3]
    a_alone, _ = model.predict(fresh[1:2], state=None, episode_start=np.ones(1, dtype=bool))
    np.testing.assert_allclose(a_reset[1], a_alone[0], atol=1e-6)  # env 1 acts as at an episode start
    a_cont, _ = model.predict(fresh, state=state, episode_start=np.zeros(3, dtype=bool))
    np.testing.assert_allclose(a_reset[[0, 2]], a_cont[[0, 2]], atol=1e-6)  # others keep their memory
    assert not np.allclose(a_reset[1], a_cont[1])
    single, single_state = model.predict(fresh[0])
    assert single.shape == (1,) and single_state.lengths.tolist() == [1]


def test_training_windows_reset_at_episode_ends_and_learning_runs():
    env = DummyVecEnv([lambda: MemoryEnv(delay=2)] * 2)
    model = small_model(env, train_freq=1, gradient_steps=1)
    model.learn(60)
    assert model.replay_buffer.episode_steps[:30].max() == 2  # episodes of three steps, per env
    assert model._rollout_window is not None and model._rollout_window.lengths.max() <= 2
    assert model._n_updates > 0
    assert ALGORITHMS["lstm-td3"] is LSTMTD3 and LSTMTD3.is_recurrent


def test_save_load_round_trip_gives_identical_actions(tmp_path):
    model = small_model(DummyVecEnv([lambda: MemoryEnv(delay=2)]))
    model.learn(40)
    model.save(tmp_path / "m.zip")
    loaded = LSTMTD3.load(tmp_path / "m.zip", device="cpu")
    assert loaded.history_length == 3 and loaded.policy.lstm_hidden_size == 8
    obs = np.random.default_rng(1).normal(size=(5, 4, 2)).astype(np.float32)
    states = [None, None]
    for t in range(5):
        start = np.full(4, t == 0)
        a, states[0] = model.predict(obs[t], state=states[0], episode_start=start, deterministic=True)
        b, states[1] = loaded.predict(obs[t], state=states[1], episode_start=start, deterministic=True)
        np.testing.assert_array_equal(a, b)
    for p, q in zip(model.policy.parameters(), loaded.policy.parameters(), strict=True):
        assert th.equal(p, q)


def test_trains_through_fieldrl_and_evaluates_with_per_episode_windows(tmp_path):
    params = MEMORY.params_model(delay=2)
    entry = LearnedEntry(
        algorithm="lstm-td3",
        policy="MlpLstmPolicy",
        train_steps=120,
        n_envs=2,
        hyperparameters={
            "learning_starts": 40,
            "batch_size": 16,
            "history_length": 2,
            "lstm_hidden_size": 8,
            "policy_kwargs": SMALL,
            "action_noise": {"type": "normal", "sigma": 0.2},
        },
    )
    artifacts = train_model(
        lambda n, s: MEMORY.make_train_vec_env(params, n, s), entry.training_spec(), 0, tmp_path
    )
    for name, data in artifacts.items():
        (tmp_path / name).write_bytes(data)
    make = lambda n, s: MEMORY.make_train_vec_env(params, n, s)  # noqa: E731
    policy = load_policy("LSTM-TD3", entry.training_spec(), make, tmp_path / MODEL_FILE, tmp_path / NORM_FILE)
    assert policy.recurrent
    kpis, _ = run_episodes(MEMORY, params, policy, [5, 6, 7])
    assert kpis["success"].shape == (3,)
    assert policy._state.lengths.tolist() == [2, 2, 2]  # one window per evaluated episode
    again, _ = run_episodes(MEMORY, params, policy, [5, 6, 7])
    np.testing.assert_array_equal(kpis["return"], again["return"])


def test_bad_settings_are_refused():
    env = DummyVecEnv([lambda: MemoryEnv(delay=2)])
    with pytest.raises(ValueError, match="history_length"):
        LSTMTD3("MlpLstmPolicy", env, history_length=0)
    with pytest.raises(ValueError, match="policy_kwargs"):
        LSTMTD3("MlpLstmPolicy", env, policy_kwargs={"history_length": 3})
