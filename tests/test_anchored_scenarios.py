"""Heuristic-anchored training from a scenario: warm starts in every domain, residual policies."""

from __future__ import annotations

import json

import pytest
from pypdf import PdfReader

import fieldrl
from fieldrl.errors import ScenarioError
from fieldrl.scenario import load_scenario


def _anchored(data: dict) -> dict:
    data["params"] = {"preset": "s1", "max_t": 80}
    data["policies"]["heuristics"].append({"use": "tumour-feedback", "name": "tumour feedback"})
    data["seeds"]["validation"] = {"start": 50, "count": 2}
    base = {"train_steps": 600, "n_envs": 2, "hyperparameters": {"learning_starts": 200, "batch_size": 32}}
    data["policies"]["learned"] = [
        {
            "algorithm": "td3",
            "name": "TD3 cloned",
            **base,
            "imitate": {"heuristic": "tumour feedback", "episodes": 2},
        },
        {"algorithm": "sac", "name": "SAC residual", **base, "residual": {"heuristic": "tumour feedback"}},
    ]
    return data


def test_a_single_agent_warm_start_and_a_residual_policy_run_end_to_end(
    scenario_data, write_scenario, tmp_path
):
    result = fieldrl.run(write_scenario(_anchored(scenario_data)), out=tmp_path / "r", show_progress=False)
    cloned = json.loads((result.run_dir / "models/default/TD3-cloned/seed-0/imitation.json").read_text())
    assert cloned["decisions"] == 2 * 80 and cloned["action_error"] < 0.1
    frame = result.results[result.results["metric"] == "total_dose"]
    assert set(frame["policy"]) == {
        "no treatment",
        "constant 0.5",
        "tumour feedback",
        "TD3 cloned",
        "SAC residual",
    }
    dose = frame.groupby("policy")["value"].mean()
    # the residual policy can move the heuristic's dose by at most 0.2 x half the dose range per step
    assert abs(dose["SAC residual"] - dose["tumour feedback"]) <= 0.1 * 80 * 0.25 + 1e-9
    text = " ".join(" ".join((page.extract_text() or "").split()) for page in PdfReader(result.report).pages)
    assert "Residual: the network's action is a correction" in text and "Warm start: behaviour-cloned" in text
    records = result.summary.training_records("default", "SAC residual")  # training seed 0 first
    assert records and records[0].selected is not None


def test_residual_needs_continuous_actions_and_excludes_a_warm_start(scenario_data, write_scenario):
    data = _anchored(scenario_data)
    data["policies"]["learned"][1]["imitate"] = {"heuristic": "tumour feedback"}
    with pytest.raises(ScenarioError, match="give imitate or residual"):
        load_scenario(write_scenario(data))
    wealth = load_scenario("wealth/single-goal").model_dump(mode="json", exclude_none=True)
    wealth["policies"]["learned"][0]["residual"] = {"heuristic": "balanced"}
    with pytest.raises(ScenarioError) as info:
        load_scenario(write_scenario(wealth, "wealth.yaml"))
    assert "policies.learned[0].residual" in str(info.value) and "Box" in str(info.value)
    wealth["policies"]["learned"][0]["residual"] = {"heuristic": "nobody"}
    with pytest.raises(ScenarioError, match="residual.heuristic = 'nobody'"):
        load_scenario(write_scenario(wealth, "wealth.yaml"))


def test_warm_starts_are_refused_for_algorithms_that_cannot_be_cloned(scenario_data, write_scenario):
    data = _anchored(scenario_data)
    data["policies"]["learned"] = [
        {
            "algorithm": "recurrent-ppo",
            "policy": "MlpLstmPolicy",
            "train_steps": 256,
            "n_envs": 2,
            "hyperparameters": {"n_steps": 64, "batch_size": 64},
            "imitate": {"heuristic": "tumour feedback"},
        }
    ]
    with pytest.raises(ScenarioError, match="imitation warm starts ppo, maskable-ppo"):
        load_scenario(write_scenario(data))
