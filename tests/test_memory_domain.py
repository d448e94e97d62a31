"""Cue-memory domain: a valid env, memoryless baselines at chance, and recurrent learners above it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from typer.testing import CliRunner

from fieldrl.domains.memory import DOMAIN
from fieldrl.domains.memory.env import MemoryEnv
from fieldrl.evaluation.runner import run_episodes
from fieldrl.policies.learned import MODEL_FILE, NORM_FILE, load_policy, train_model
from fieldrl.scenario import LearnedEntry

HELD_OUT = list(range(10_000, 10_100))


@pytest.fixture(autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("noise", [0.0, 0.3])
def test_env_passes_gymnasium_and_sb3_checkers(noise: float) -> None:
    gym_check_env(MemoryEnv(delay=3, noise=noise), skip_render_check=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no SB3 warnings either
        sb3_check_env(MemoryEnv(delay=3, noise=noise), warn=True)


def test_cue_is_shown_once_and_only_the_final_action_is_scored() -> None:
    env = MemoryEnv(delay=3)
    obs, info = env.reset(seed=4)
    cue = info["cue"]
    assert obs[0] == cue and obs[1] == 0.0
    for t in range(1, 4):
        obs, reward, terminated, truncated, _ = env.step(np.array([-cue]))  # wrong sign is free here
        assert obs[0] == 0.0 and obs[1] == pytest.approx(t / 3)
        assert reward == 0.0 and not terminated and not truncated
    _, reward, terminated, _, info = env.step(np.array([0.2 * cue]))
    assert reward == 1.0 and terminated and info["success"] == 1.0
    env.reset(seed=4)
    for _ in range(3):
        env.step(np.array([cue]))
    assert env.step(np.array([-cue]))[1] == -1.0


def test_reset_seed_reproduces_cues_and_both_cues_occur() -> None:
    cues = [MemoryEnv().reset(seed=s)[1]["cue"] for s in range(40)]
    assert cues == [MemoryEnv().reset(seed=s)[1]["cue"] for s in range(40)]
    assert set(cues) == {-1.0, 1.0}


def test_params_are_bounded() -> None:
    with pytest.raises(ValueError):
        DOMAIN.params_model(delay=0)
    with pytest.raises(ValueError):
        DOMAIN.params_model(noise=2.0)
    with pytest.raises(ValueError):
        DOMAIN.params_model(cue=1)


def heuristic(use: str, **settings):
    spec = DOMAIN.heuristics[use]
    return spec.build(spec.settings_model(**settings), DOMAIN.params_model(), use)


@pytest.mark.parametrize(("use", "low", "high"), [("constant", 40, 60), ("random", 38, 62)])
def test_memoryless_heuristics_score_about_half(use: str, low: float, high: float) -> None:
    params = DOMAIN.params_model(delay=5)
    kpis, _ = run_episodes(DOMAIN, params, heuristic(use), list(range(1000, 1400)))
    assert low <= kpis["success"].mean() <= high
    assert set(np.unique(kpis["return"])) <= {-1.0, 1.0}
    np.testing.assert_array_equal(kpis["return"] > 0, kpis["success"] == 100)


def test_remembering_the_cue_solves_the_task() -> None:
    kpis, _ = run_episodes(DOMAIN, DOMAIN.params_model(delay=5), heuristic("remember-cue"), HELD_OUT)
    assert kpis["success"].mean() == 100.0


# ----------------------------------------------------------------------------- learned memory

DELAY = 3
TD3_HP = {
    "learning_starts": 300,
    "batch_size": 64,
    "policy_kwargs": {"net_arch": [64, 64]},
    "action_noise": {"type": "normal", "sigma": 0.3},
}
LEARNERS = {
    "td3": ("MlpPolicy", 1200, 1, TD3_HP),
    "lstm-td3": (
        "MlpLstmPolicy",
        1200,
        1,
        {
            **TD3_HP,
            "history_length": DELAY,
            "lstm_hidden_size": 32,
            "policy_kwargs": {"net_arch": [64, 64], "pre_lstm_arch": [32], "feature_arch": [32]},
        },
    ),
    "recurrent-ppo": (
        "MlpLstmPolicy",
        4096,
        8,
        {
            "n_steps": 32,
            "batch_size": 64,
            "n_epochs": 4,
            "learning_rate": 3e-3,
            "policy_kwargs": {"lstm_hidden_size": 32, "net_arch": [32]},
        },
    ),
}


def held_out_success(algorithm: str, tmp_path) -> float:
    policy_name, steps, n_envs, hp = LEARNERS[algorithm]
    params = DOMAIN.params_model(delay=DELAY)
    entry = LearnedEntry(
        algorithm=algorithm, policy=policy_name, train_steps=steps, n_envs=n_envs, hyperparameters=hp
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Monitor inside VecMonitor
        artifacts = train_model(
            lambda n, s: DOMAIN.make_train_vec_env(params, n, s), entry.training_spec(), 0, tmp_path
        )
    for name, data in artifacts.items():
        (tmp_path / name).write_bytes(data)
    make = lambda n, s: DOMAIN.make_train_vec_env(params, n, s)  # noqa: E731
    policy = load_policy(algorithm, entry.training_spec(), make, tmp_path / MODEL_FILE, tmp_path / NORM_FILE)
    kpis, _ = run_episodes(DOMAIN, params, policy, HELD_OUT)
    return float(kpis["success"].mean())


def test_lstm_td3_learns_to_remember_the_cue_and_td3_cannot(tmp_path):
    assert held_out_success("lstm-td3", tmp_path / "lstm") >= 90.0
    assert held_out_success("td3", tmp_path / "td3") <= 70.0


def test_recurrent_ppo_learns_to_remember_the_cue(tmp_path):
    assert held_out_success("recurrent-ppo", tmp_path) >= 90.0


def test_cue_scenario_runs_end_to_end_on_the_quick_budget(tmp_path):
    import pandas as pd

    from fieldrl.cli import app

    out = tmp_path / "cue"
    result = CliRunner().invoke(app, ["run", "memory/cue", "--budget", "demo", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    results = pd.read_parquet(out / "results.parquet")
    assert set(results["policy"]) == {"constant +1", "random", "TD3", "LSTM-TD3", "RecurrentPPO"}
    assert set(results["metric"]) == {"success", "return"}
    assert (out / "report.pdf").is_file()
