"""Imitation warm start: demonstrations of a rail dispatcher, cloning them, and scenario checks."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import VecNormalize

from fieldrl.api import run
from fieldrl.domains.rail import DOMAIN
from fieldrl.domains.rail.params import RailParams
from fieldrl.errors import ScenarioError
from fieldrl.evaluation.runner import demonstration_seeds
from fieldrl.policies.imitation import clone, collect
from fieldrl.scenario import Scenario, load_scenario


def _demos(seeds: list[int], gamma: float = 0.99):
    params = RailParams(level=0)
    spec = DOMAIN.heuristics["priority-reroute"]
    policy = spec.build(spec.settings_model(), params, "priority reroute")
    envs = DOMAIN.make_eval_envs(params, seeds)
    try:
        return collect(envs, policy, gamma)
    finally:
        envs.close()


def _accuracy(model: MaskablePPO, obs: np.ndarray, demos) -> float:
    with torch.no_grad():
        dist = model.policy.get_distribution(torch.as_tensor(obs), action_masks=demos.masks)
        return float((dist.distribution.probs.argmax(1).numpy() == demos.actions).mean())


@pytest.mark.needs("rail")
def test_demonstrations_are_real_choices_with_their_returns():
    demos = _demos([3, 4])
    assert len(demos) > 20
    assert demos.obs.shape == (
        len(demos),
        DOMAIN.make_eval_envs(RailParams(), [0]).observation_space.shape[0],
    )
    # every kept decision offered a choice, and the dispatcher's action was allowed
    assert (demos.masks.sum(1) > 1).all()
    assert demos.masks[np.arange(len(demos)), demos.actions].all()
    # both decision kinds are present: dispatch (depart/hold/cancel = 1..3) and routing (4..7)
    assert (demos.actions <= 3).any() and (demos.actions >= 4).any()
    # returns-to-go are bounded by the reward scale (arrival bonus 1, penalties -1 per train)
    assert np.isfinite(demos.returns).all() and np.abs(demos.returns).max() < 5
    assert len(demos.all_obs) >= len(demos)


def test_demonstrations_collected_in_batches_join_into_one_set():
    """Traffic collects one episode at a time (libsumo runs one simulation per process)."""
    from fieldrl.policies.imitation import Demonstrations

    a, b = _demos([3]), _demos([4])
    both = Demonstrations.concatenate([a, b])
    assert len(both) == len(a) + len(b) and both.episodes == a.episodes + b.episodes
    assert (both.actions[len(a) :] == b.actions).all() and len(both.all_obs) == len(a.all_obs) + len(
        b.all_obs
    )
    assert Demonstrations.concatenate([a]) is a


@pytest.mark.needs("rail")
def test_cloning_makes_the_actor_pick_the_dispatchers_actions():
    demos = _demos([5, 6, 7])
    vec = VecNormalize(DOMAIN.make_train_vec_env(RailParams(level=0), 1, 0), norm_reward=False)
    model = MaskablePPO("MlpPolicy", vec, seed=0, device="cpu", n_steps=8, batch_size=8)
    stats = clone(model, vec, demos, epochs=40, seed=0)
    obs = vec.normalize_obs(demos.obs).astype(np.float32)
    untrained = MaskablePPO("MlpPolicy", vec, seed=0, device="cpu", n_steps=8, batch_size=8)
    before = _accuracy(untrained, obs, demos)
    assert stats["accuracy"] == pytest.approx(_accuracy(model, obs, demos))
    assert stats["accuracy"] >= 0.8 and stats["accuracy"] > before + 0.2
    # the critic learned the returns' scale too
    with torch.no_grad():
        values = model.policy.predict_values(torch.as_tensor(obs)).flatten().numpy()
    assert np.corrcoef(values, demos.returns)[0, 1] > 0.5
    # normalisation statistics now reflect the demonstrations
    assert vec.obs_rms.count > len(demos.all_obs)


def test_demonstration_seeds_skip_held_out_ones(scenario_data):
    scenario_data["seeds"] = {"train": [0], "eval": [2, 3, 9]}
    scenario = Scenario.model_validate(scenario_data)
    assert demonstration_seeds(scenario, 1, 5) == [1, 4, 5, 6, 7]


RAIL = {
    "name": "rail-imitate",
    "domain": "rail",
    "params": {"level": 0},
    "policies": {
        "heuristics": [{"use": "priority-reroute", "name": "reroute"}],
        "learned": [
            {
                "algorithm": "maskable-ppo",
                "name": "cloned",
                "train_steps": 64,
                "n_envs": 1,
                "imitate": {"heuristic": "reroute", "episodes": 2, "epochs": 3},
                "hyperparameters": {"n_steps": 8, "batch_size": 64},
            }
        ],
    },
    "seeds": {"train": [0], "eval": [10000]},
}


@pytest.mark.parametrize(
    "path,value,expected",
    [
        (
            ("imitate", "heuristic"),
            "oracle",
            ["policies.learned[0].imitate.heuristic", "'oracle'", "reroute"],
        ),
        (("algorithm",), "dqn", ["policies.learned[0].imitate", "'dqn'", "ppo, maskable-ppo"]),
        (("imitate", "epochs"), 0, ["policies.learned[0].imitate.epochs", "greater than or equal to 1"]),
    ],
)
@pytest.mark.needs("rail")
def test_bad_imitation_settings_are_named(tmp_path, path, value, expected):
    data = json.loads(json.dumps(RAIL))
    node = data["policies"]["learned"][0]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(data))
    with pytest.raises(ScenarioError) as info:
        load_scenario(f)
    for text in expected:
        assert text in str(info.value)


def test_a_single_agent_domain_accepts_a_warm_start(tmp_path, scenario_data):
    """Warm starts were multi-agent only; any domain may now clone one of its heuristics."""
    scenario_data["policies"]["learned"][0]["imitate"] = {"heuristic": "no treatment"}
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(scenario_data))
    assert load_scenario(f).policies.learned[0].imitate.heuristic == "no treatment"


@pytest.mark.needs("rail")
def test_warm_started_run_records_the_cloning(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(RAIL))
    result = run(f, out=tmp_path / "out", show_progress=False)
    stats = json.loads(next(result.run_dir.glob("models/*/*/seed-0/imitation.json")).read_text())
    assert stats["episodes"] == 2 and stats["decisions"] > 10
    assert 0 <= stats["accuracy"] <= 1


@pytest.mark.needs("rail")
def test_sampling_keeps_whole_decisions():
    demos = _demos([3])
    kept = demos.sample(10, seed=1)
    assert len(kept) == 10 and demos.sample(len(demos), seed=1) is demos
    rows = {tuple(r) for r in np.column_stack([demos.obs, demos.actions, demos.returns]).round(5)}
    assert all(tuple(r) in rows for r in np.column_stack([kept.obs, kept.actions, kept.returns]).round(5))
