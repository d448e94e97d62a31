"""Learned policies: YAML hyperparameters become SB3 arguments; recurrent state is carried."""

from __future__ import annotations

import numpy as np
import pytest
from stable_baselines3.common.noise import NormalActionNoise
from torch import nn

from fieldrl.domains import get_domain
from fieldrl.evaluation.runner import run_episodes
from fieldrl.policies.learned import MODEL_FILE, NORM_FILE, load_policy, normalize_obs, train_model
from fieldrl.policies.registry import build_kwargs, check_hyperparameters
from fieldrl.scenario import LearnedEntry


def test_yaml_hyperparameters_become_constructor_arguments():
    kwargs = build_kwargs(
        {
            "learning_rate": "3e-4",  # YAML 1.1 reads this as a string
            "train_freq": [1, "episode"],
            "policy_kwargs": {"net_arch": [32, 32], "activation_fn": "tanh"},
            "action_noise": {"type": "normal", "sigma": 0.2},
        },
        action_dim=1,
    )
    assert kwargs["learning_rate"] == pytest.approx(3e-4)
    assert kwargs["train_freq"] == (1, "episode")
    assert kwargs["policy_kwargs"] == {"net_arch": [32, 32], "activation_fn": nn.Tanh}
    assert isinstance(kwargs["action_noise"], NormalActionNoise)


def test_hyperparameter_problems_are_named():
    assert check_hyperparameters("sac", {"tau": 0.01}) is None
    key, allowed = check_hyperparameters("sac", {"n_epochs": 5})
    assert key == "n_epochs" and "learning_rate" in allowed
    key, allowed = check_hyperparameters("ppo", {"policy_kwargs": {"activation_fn": "swish"}})
    assert "tanh" in allowed
    assert check_hyperparameters("ppo", {"seed": 3})[0] == "seed"  # fieldrl sets seeds itself


def test_observation_normalisation_matches_training_statistics():
    norm = {"mean": [1.0], "var": [4.0], "clip_obs": 5.0, "epsilon": 0.0}
    out = normalize_obs(np.array([[3.0], [100.0]]), norm)
    np.testing.assert_allclose(out, [[1.0], [5.0]])


def test_recurrent_ppo_trains_saves_loads_and_evaluates_with_lstm_state(tmp_path):
    domain = get_domain("chemo")
    params = domain.params_model(preset="s5", max_t=40)
    entry = LearnedEntry(
        algorithm="recurrent-ppo",
        policy="MlpLstmPolicy",
        train_steps=128,
        n_envs=2,
        hyperparameters={"n_steps": 64, "batch_size": 64, "n_epochs": 1},
    )
    artifacts = train_model(
        lambda n, s: domain.make_train_vec_env(params, n, s), entry.training_spec(), 0, tmp_path
    )
    for name, data in artifacts.items():
        (tmp_path / name).write_bytes(data)
    make = lambda n, s: domain.make_train_vec_env(params, n, s)  # noqa: E731
    policy = load_policy("LSTM", entry.training_spec(), make, tmp_path / MODEL_FILE, tmp_path / NORM_FILE)
    assert policy.recurrent
    kpis, _ = run_episodes(domain, params, policy, [5, 6, 7])
    assert kpis["return"].shape == (3,)
    hidden, cell = policy._state
    assert hidden.shape[1] == 3  # one LSTM state per evaluated patient
    again, _ = run_episodes(domain, params, policy, [5, 6, 7])
    np.testing.assert_array_equal(kpis["return"], again["return"])  # state reset between batches
