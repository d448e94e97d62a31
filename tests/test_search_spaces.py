"""Search spaces: every sampled configuration can train within the budget and builds in SB3."""

from __future__ import annotations

import optuna
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from optuna.distributions import CategoricalDistribution

from fieldrl.policies.feasibility import training_problem
from fieldrl.policies.registry import check_hyperparameters
from fieldrl.policies.search_spaces import MAX_UPDATES, describe, search_space, to_hyperparameters

ALGORITHMS = ["ppo", "a2c", "trpo", "maskable-ppo", "recurrent-ppo", "sac", "td3", "ddpg", "tqc", "dqn"]


def _sample(space, draw) -> dict:
    out = {}
    for name, dist in space.items():
        if isinstance(dist, CategoricalDistribution):
            out[name] = draw(st.sampled_from(list(dist.choices)))
        else:
            out[name] = draw(st.floats(dist.low, dist.high))
    return out


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    data=st.data(),
    algorithm=st.sampled_from(ALGORITHMS),
    n_envs=st.sampled_from([1, 4, 16]),
    width=st.sampled_from([1, 7]),
    steps=st.integers(500, 300_000),
)
def test_every_sample_is_brought_within_the_budget(data, algorithm, n_envs, width, steps):
    space = search_space(algorithm, n_envs)
    hp, envs = to_hyperparameters(algorithm, _sample(space, data.draw), steps, width)
    assert check_hyperparameters(algorithm, hp) is None
    if envs * width * 2 <= steps:  # a budget that fits at least a two-step rollout
        assert training_problem(algorithm, hp, envs, width, steps) is None, hp
    if "gradient_steps" in hp:
        assert hp["gradient_steps"] <= hp["train_freq"] * envs * width  # at most one update per step
    rollout = hp.get("n_steps", 0) * envs * width
    if "n_epochs" in hp and hp["batch_size"] < rollout:  # PPO-like: a bounded number of updates
        rollouts = -(-steps // rollout)
        assert (
            rollouts * hp["n_epochs"] * -(-rollout // hp["batch_size"]) <= 1.5 * MAX_UPDATES + rollouts * 20
        )


def test_spaces_tune_what_the_off_policy_learners_need():
    sac = search_space("sac", 16)
    assert {"gradient_steps", "train_freq", "n_envs", "net_arch", "learning_rate"} <= set(sac)
    assert list(sac["n_envs"].choices) == [4, 8, 16, 32]
    assert {"noise_type", "noise_std"} <= set(search_space("td3", 4))
    assert "ent_coef" in search_space("ppo", 8) and "exploration_fraction" in search_space("dqn", 1)
    text = describe(sac)
    assert text["learning_rate"] == "log-uniform in [1e-05, 0.01]" and text["n_envs"] == "one of 4, 8, 16, 32"


def test_a_trial_samples_from_the_declared_space():
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask(search_space("ppo", 8))
    hp, n_envs = to_hyperparameters("ppo", trial.params, 100_000, 1)
    assert n_envs in (2, 4, 8, 16)
    assert hp["policy_kwargs"]["net_arch"]["pi"] in ([64], [64, 64], [256, 256])
    assert 0.9 <= hp["gae_lambda"] <= 1.0


@pytest.mark.parametrize("algorithm", ["ppo", "sac", "td3"])
def test_sampled_configurations_build_in_sb3(algorithm):
    from fieldrl.domains import get_domain
    from fieldrl.policies.learned import construction_problem
    from fieldrl.scenario import LearnedEntry

    domain = get_domain("chemo")
    params = domain.params_model()
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(3):
        trial = study.ask(search_space(algorithm, 4))
        hp, n_envs = to_hyperparameters(algorithm, trial.params, 20_000, 1)
        entry = LearnedEntry(algorithm=algorithm, train_steps=20_000, n_envs=n_envs, hyperparameters=hp)
        assert (
            construction_problem(lambda n, s: domain.make_train_vec_env(params, n, s), entry.training_spec())
            is None
        )
