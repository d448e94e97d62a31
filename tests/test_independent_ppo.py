"""independent-ppo: one network per agent, routed by the agent id the env appends (UAV MARL baseline)."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO

from fieldrl.domains.uav import DOMAIN
from fieldrl.policies.independent import IndependentMlpExtractor, IndependentPPO
from fieldrl.policies.learned import MODEL_FILE, NORM_FILE, construction_problem, load_policy, train_model
from fieldrl.scenario import LearnedEntry, load_scenario
from fieldrl.simulators.uav.params import UavParams

MARL = UavParams(n_uavs=2, n_vehicles=8, episode_slots=6, load=2.0, pipeline=False, agent_ids=True)
FAST = {"n_steps": 16, "batch_size": 32, "n_epochs": 2}


def _model(params: UavParams = MARL, seed: int = 0, cls: type = IndependentPPO) -> PPO:
    venv = DOMAIN.make_train_vec_env(params, n_envs=1, seed=seed)
    return cls("MlpPolicy", venv, seed=seed, device="cpu", **FAST)


def _lockstep_obs(params: UavParams = MARL, seeds: tuple[int, ...] = (7, 8, 9)) -> np.ndarray:
    return DOMAIN.make_eval_envs(params, list(seeds)).reset()


def test_env_appends_a_one_hot_uav_index_and_tells_the_learner():
    env = DOMAIN.make_parallel_env(MARL)
    obs, _ = env.reset(seed=0)
    assert env.n_agent_ids == 2 and env.observation_space("uav_0").shape == (12 + 6 * 6 + 2,)
    np.testing.assert_array_equal(obs["uav_0"][-2:], [1, 0])
    np.testing.assert_array_equal(obs["uav_1"][-2:], [0, 1])
    assert DOMAIN.make_parallel_env(MARL.model_copy(update={"agent_ids": False})).n_agent_ids == 0


@pytest.mark.needs("uav")
def test_policy_acts_on_batched_multi_agent_observations():
    model = _model()
    policy = model.policy
    assert policy.n_agents == 2 and isinstance(policy.mlp_extractor, IndependentMlpExtractor)
    assert len(policy.mlp_extractor.agents) == 2
    obs = _lockstep_obs()  # (n_episodes, n_slots, obs)
    assert obs.shape == (3, 2, 50)
    actions, _ = model.predict(obs.reshape(6, -1), deterministic=True)
    assert actions.shape == (6,) and ((actions >= 0) & (actions < model.action_space.n)).all()
    # each agent's rows see its own network: swapping the id (only) changes what the network computes
    flat = torch.as_tensor(obs.reshape(6, -1))
    swapped = flat.clone()
    swapped[:, -2:] = swapped[:, -2:].flip(1)
    with torch.no_grad():
        assert not torch.allclose(policy.predict_values(flat), policy.predict_values(swapped))


def _agent_grads(policy, agent: int) -> list[torch.Tensor]:
    """Gradients of every parameter that belongs to ``agent`` alone (zeros where none flowed)."""
    ext = policy.mlp_extractor
    n = policy.n_agents
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in ext.agents[agent].parameters()]
    for head, block in ((policy.action_net, ext.block_pi), (policy.value_net, ext.block_vf)):
        cols = torch.as_tensor(np.r_[agent * block : (agent + 1) * block, n * block + agent])
        grads.append(head.weight.grad[:, cols])
    return grads


@pytest.mark.needs("uav")
@pytest.mark.parametrize("agent", [0, 1])
def test_an_agents_parameters_get_no_gradient_from_another_agents_samples(agent):
    policy = _model().policy
    other = 1 - agent
    obs = torch.as_tensor(_lockstep_obs(seeds=(3, 4, 5, 6))[:, agent])  # agent's samples only
    actions = torch.as_tensor(np.arange(len(obs)) % policy.action_space.n)
    values, log_prob, entropy = policy.evaluate_actions(obs, actions)
    policy.optimizer.zero_grad()
    (values.pow(2).mean() - log_prob.mean() - entropy.mean()).backward()
    assert all(g.abs().max() > 0 for g in _agent_grads(policy, agent)[-2:])  # its own heads learn
    assert sum(float(g.abs().sum()) for g in _agent_grads(policy, agent)) > 0
    for g in _agent_grads(policy, other):
        assert torch.count_nonzero(g) == 0
    assert not policy.action_net.bias.requires_grad and policy.action_net.bias.grad is None
    assert not policy.value_net.bias.requires_grad and policy.value_net.bias.grad is None


@pytest.mark.needs("uav")
def test_without_agent_ids_it_is_plain_ppo_with_one_shared_network():
    shared = MARL.model_copy(update={"agent_ids": False})
    ours = _model(shared, cls=IndependentPPO).learn(64)  # one after the other: SB3 seeds global RNGs
    sb3 = _model(shared, cls=PPO).learn(64)
    assert ours.policy.n_agents == 0
    a, b = ours.policy.state_dict(), sb3.policy.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.needs("uav")
def test_train_save_load_round_trip_gives_identical_actions(tmp_path):
    model = _model()
    before = [p.detach().clone() for p in model.policy.mlp_extractor.agents.parameters()]
    model.learn(64)
    after = list(model.policy.mlp_extractor.agents.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    obs = _lockstep_obs().reshape(6, -1)
    expected, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "m.zip")
    loaded = IndependentPPO.load(tmp_path / "m.zip", device="cpu")
    assert loaded.policy.n_agents == 2
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], expected)
    for key, value in model.policy.state_dict().items():
        assert torch.equal(loaded.policy.state_dict()[key], value)


@pytest.mark.needs("uav")
def test_spine_trains_saves_and_loads_it_like_any_learned_policy(tmp_path):
    entry = LearnedEntry(algorithm="independent-ppo", train_steps=64, n_envs=1, hyperparameters=FAST)
    artifacts = train_model(partial(DOMAIN.make_train_vec_env, MARL), entry.training_spec(), 0, tmp_path)
    for name, data in artifacts.items():
        (tmp_path / name).write_bytes(data)
    make = partial(DOMAIN.make_train_vec_env, MARL)
    first = load_policy("PPO", entry.training_spec(), make, tmp_path / MODEL_FILE, tmp_path / NORM_FILE)
    again = load_policy("PPO", entry.training_spec(), make, tmp_path / MODEL_FILE, tmp_path / NORM_FILE)
    assert first.model.policy.n_agents == 2
    obs = _lockstep_obs()
    actions = first.act(obs, np.ones(3, dtype=bool))
    assert actions.shape == (3, 2)
    np.testing.assert_array_equal(actions, again.act(obs, np.ones(3, dtype=bool)))


def test_uav_scenarios_train_the_marl_baseline_with_independent_learners():
    for name in ("uav/quick", "uav/dense-city"):
        scenario = load_scenario(name)
        assert all(e.algorithm == "independent-ppo" for e in scenario.policies.learned)
        marl = [v for v in scenario.variant_names if scenario.variant_params(v).get("pipeline") is False]
        assert marl and all(scenario.variant_params(v)["agent_ids"] is True for v in marl)
        assert not any(
            scenario.variant_params(v).get("agent_ids") for v in scenario.variant_names if v not in marl
        )
        params = DOMAIN.params_model.model_validate(scenario.variant_params(marl[0]))
        for entry in scenario.policies.learned:  # every entry that runs in the MARL setting builds there
            if entry.runs_in(marl[0]):
                assert (
                    construction_problem(partial(DOMAIN.make_train_vec_env, params), entry.training_spec())
                    is None
                )
        assert any(e.runs_in(marl[0]) for e in scenario.policies.learned)
    assert "marl" in load_scenario("uav/quick").with_budget("demo").variant_names


def test_continuous_actions_are_refused():
    from stable_baselines3.common.env_util import make_vec_env

    with pytest.raises(ValueError, match="discrete"):
        IndependentPPO("MlpPolicy", make_vec_env("Pendulum-v1"), policy_kwargs={"n_agents": 1}, device="cpu")
