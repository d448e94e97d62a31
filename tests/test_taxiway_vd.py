"""Value-decomposed MaskablePPO: per-term returns, weighted advantages, and a shared policy that runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecMonitor

from fieldrl.domains import get_domain
from fieldrl.policies.learned import SB3Policy
from fieldrl.policies.vd_ppo import VDMaskablePPO, VDRolloutBuffer


def test_buffer_gives_each_term_its_own_return_and_weights_the_advantages():
    buf = VDRolloutBuffer(
        3,
        spaces.Box(-1, 1, (2,)),
        spaces.Discrete(2),
        "cpu",
        gae_lambda=1.0,
        gamma=0.5,
        n_envs=1,
        term_weights=(10.0, 1.0),
    )
    rewards = [(-1.0, 2.0), (0.0, 2.0), (0.0, 2.0)]
    for k, r in enumerate(rewards):
        buf.add(
            np.zeros((1, 2)),
            np.zeros(1),
            np.array([r]),
            np.array([k == 0]),
            th.zeros(1, 2),
            th.zeros(1),
            action_masks=np.ones((1, 2)),
        )
    buf.compute_returns_and_advantage(th.zeros(1, 2), np.array([True]))
    assert buf.returns[:, 0, 0] == pytest.approx([-1.0, 0.0, 0.0])
    assert buf.returns[:, 0, 1] == pytest.approx([2 + 1 + 0.5, 2 + 1, 2])
    assert buf.advantages[:, 0] == pytest.approx(10 * buf.returns[:, 0, 0] + buf.returns[:, 0, 1])


def test_vd_ppo_trains_on_the_taxiway_slots_and_acts_within_the_masks():
    domain = get_domain("taxiway")
    params = domain.params_model(layout="small", density="medium", max_slots=8)
    venv = VecMonitor(domain.make_train_vec_env(params, 2, 0))
    model = VDMaskablePPO("MlpPolicy", venv, n_steps=32, batch_size=256, seed=0, device="cpu", n_epochs=2)
    model.learn(1024)
    assert model.policy.value_net.out_features == 3
    assert np.abs(model.rollout_buffer.rewards).sum(axis=(0, 1)).min() > 0  # every term was seen
    envs = domain.make_eval_envs(params, [5])
    policy = SB3Policy("vd", model)
    obs = envs.reset()
    policy.reset(1)
    policy.bind_envs(envs)
    for _ in range(40):
        masks = envs.action_masks()
        actions = policy.act(obs, np.zeros(1, dtype=bool))
        seated = [a is not None for a in envs.slot_agents(0)]
        for slot, ok in enumerate(seated):
            if ok:
                assert masks[0, slot, actions[0, slot]]
        obs, _, term, trunc, _ = envs.step(actions)
        if term[0] or trunc[0]:
            break


def test_truncated_episodes_are_bootstrapped_per_term():
    """Short episodes end by truncation with aircraft still taxiing: each term gets gamma * V_k."""
    domain = get_domain("taxiway")
    params = domain.params_model(layout="small", density="high", max_slots=8, horizon_min=1.0, drain_min=0.5)
    venv = VecMonitor(domain.make_train_vec_env(params, 1, 0))
    model = VDMaskablePPO("MlpPolicy", venv, n_steps=64, batch_size=256, seed=0, device="cpu", n_epochs=1)
    calls: list[np.ndarray] = []
    values = model.env.value_fn

    def spy(obs: np.ndarray) -> np.ndarray:
        out = values(obs)
        calls.append(out)
        return out

    model.env.value_fn = spy
    model.learn(512)
    assert calls and all(c.shape[1] == 3 for c in calls)


def test_a_scenario_names_vd_maskable_ppo_and_runs_it_end_to_end(tmp_path):
    """Registered as ``vd-maskable-ppo``: trained, saved under the manifest, loaded and evaluated."""
    import yaml

    from fieldrl import api
    from fieldrl.scenario import scenario_text

    data = yaml.safe_load(scenario_text("taxiway/quick")[1])
    data["policies"]["heuristics"] = [{"use": "shortest-path", "name": "shortest path"}]
    data["policies"]["learned"] = [
        {
            "algorithm": "vd-maskable-ppo",
            "name": "VD-MaskablePPO",
            "train_steps": 512,
            "n_envs": 2,
            "hyperparameters": {"n_steps": 32, "batch_size": 128, "n_epochs": 2},
        }
    ]
    data["budgets"] = {"demo": {"train_steps": 512, "eval_seeds": 1}}
    path = tmp_path / "vd.yaml"
    path.write_text(yaml.safe_dump(data), "utf-8")
    run = api.train(path, out=tmp_path / "run", budget="demo", show_progress=False)
    results = api.evaluate(run, show_progress=False)
    assert set(results["policy"]) == {"shortest path", "VD-MaskablePPO"}
    vd = results[(results["policy"] == "VD-MaskablePPO") & (results["metric"] == "completed_pct")]
    assert len(vd) == 1 and 0.0 <= vd["value"].iloc[0] <= 100.0
