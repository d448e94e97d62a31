"""A learned entry that cannot learn within its budget is refused; what a model trained is read from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.domains import get_domain
from fieldrl.policies.feasibility import training_problem
from fieldrl.policies.learned import MODEL_FILE, train_model
from fieldrl.policies.weights import read_record
from fieldrl.scenario import LearnedEntry

cli = CliRunner()


def _refused(data: dict, write_scenario, tmp_path: Path, budget: str = "full") -> str:
    out = tmp_path / "never"
    result = cli.invoke(
        app, ["run", str(write_scenario(data)), "--budget", budget, "--out", str(out), "--quiet"]
    )
    flat = " ".join(result.output.split())
    assert result.exit_code == 2, flat
    assert "Traceback" not in flat and not out.exists()
    return flat


def test_off_policy_learner_that_would_never_update_is_refused(scenario_data, write_scenario, tmp_path):
    sac = {"algorithm": "sac", "train_steps": 400, "n_envs": 1, "hyperparameters": {"learning_starts": 400}}
    scenario_data["policies"]["learned"] = [sac]
    flat = _refused(scenario_data, write_scenario, tmp_path)
    assert "policies.learned[0].hyperparameters.learning_starts = 400" in flat
    assert "never make a gradient update" in flat and "learning_starts < 400" in flat


def test_a_budget_under_which_a_learner_cannot_learn_is_named(scenario_data, write_scenario, tmp_path):
    # PPO's rollout is 64 x 4 envs = 256 steps; a demo budget of 100 steps would still train 256
    scenario_data["budgets"]["demo"] = {"train_steps": 100}
    flat = _refused(scenario_data, write_scenario, tmp_path, budget="demo")
    assert "hyperparameters.n_steps = 64" in flat and "(budget demo)" in flat
    assert "256 steps" in flat and "n_steps <= 25" in flat


def test_dqn_whose_target_network_would_never_update_is_refused():
    problem = training_problem("dqn", {"learning_starts": 1000, "target_update_interval": 1000}, 1, 1, 1500)
    assert problem is not None and problem[0] == "target_update_interval"
    assert (
        training_problem("dqn", {"learning_starts": 1000, "target_update_interval": 500}, 1, 1, 1500) is None
    )


def test_multi_agent_slots_count_in_the_rollout():
    # 4 agent slots per env: a 64-step rollout of 2 envs is 512 slot-steps
    assert training_problem("ppo", {"n_steps": 64}, 2, 4, 512) is None
    assert training_problem("ppo", {"n_steps": 64}, 2, 4, 511)[0] == "n_steps"


def test_every_builtin_scenario_and_budget_can_train():
    """Every shipped scenario validates, including the trainability of each budget it defines."""
    from fieldrl.domains import missing_extra
    from fieldrl.scenario import builtin_scenarios, load_scenario

    for name in builtin_scenarios():
        if name.startswith("traffic/") or missing_extra(name.split("/")[0]):  # SUMO start-up: see below
            continue
        load_scenario(name)
    if missing_extra("traffic") is None:
        load_scenario("traffic/quick")  # stands for the traffic scenarios


@pytest.mark.parametrize(
    ("algorithm", "hyperparameters", "n_envs", "steps", "updates"),
    [
        # one rollout of 64 x 4 = 256 steps, 2 epochs of 4 minibatches of 64
        ("ppo", {"n_steps": 64, "batch_size": 64, "n_epochs": 2}, 4, 256, 8),
        # one gradient step per env step after the first 100
        ("sac", {"learning_starts": 100, "batch_size": 32}, 1, 300, 200),
    ],
)
def test_weights_file_records_the_steps_and_updates_the_model_made(
    tmp_path, algorithm, hyperparameters, n_envs, steps, updates
):
    domain = get_domain("chemo")
    params = domain.params_model(preset="s1", max_t=40)
    entry = LearnedEntry(
        algorithm=algorithm, train_steps=steps, n_envs=n_envs, hyperparameters=hyperparameters
    )
    artifacts = train_model(
        lambda n, s: domain.make_train_vec_env(params, n, s), entry.training_spec(), 0, tmp_path
    )
    (tmp_path / MODEL_FILE).write_bytes(artifacts[MODEL_FILE])
    record = read_record(tmp_path / MODEL_FILE)
    assert record["num_timesteps"] == steps
    assert record["gradient_updates"] == updates
    assert record["selected"] is None  # no validation seeds: the final weights
