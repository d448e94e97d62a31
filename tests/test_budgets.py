"""Budgets: demo caps, the medium budget's train-steps fraction, and the errors around them."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.errors import ScenarioError
from fieldrl.scenario import load_scenario, parse_scenario


def _with_second_learner(data: dict) -> dict:
    sac = {"algorithm": "sac", "name": "SAC", "train_steps": 900, "n_envs": 1}
    data["policies"]["learned"].append(sac)
    return data


def test_medium_fraction_scales_every_learner_and_keeps_their_ratio(scenario_data, write_scenario):
    data = _with_second_learner(scenario_data)
    data["policies"]["learned"][0]["train_steps"] = 512
    data["budgets"]["medium"] = {"train_steps_fraction": 0.5, "train_seeds": 1, "eval_seeds": 2}
    scenario = load_scenario(write_scenario(data)).with_budget("medium")
    assert [e.train_steps for e in scenario.policies.learned] == [256, 450]
    assert scenario.seeds.train == [0] and scenario.seeds.eval == [100, 101]
    full = load_scenario(write_scenario(data)).with_budget("full")
    assert [e.train_steps for e in full.policies.learned] == [512, 900]


def test_builtin_medium_budgets_are_a_fraction_of_the_full_study():
    memory = load_scenario("chemo/memory").with_budget("medium")
    steps = {e.label: e.train_steps for e in memory.policies.learned}
    assert steps == {"TD3": 20000, "SAC": 20000, "LSTM-TD3": 20000, "PPO": 100000, "RecurrentPPO": 100000}
    assert len(memory.seeds.train) == 2 and len(memory.seeds.eval) == 50
    assert memory.variant_names == ["s1", "s2", "s3", "s4", "s5"]


def test_rail_levels_medium_budget_is_a_tenth_of_the_full_study():
    rail = load_scenario("rail/levels").with_budget("medium")
    assert [e.train_steps for e in rail.policies.learned] == [200000, 200000, 200000]
    assert len(rail.variant_names) == 10 and len(rail.seeds.eval) == 50


def test_demo_caps_the_rail_imitation_warm_start_and_leaves_entries_without_one():
    full = load_scenario("rail/quick")
    quick = full.with_budget("demo")
    assert [e.imitate.episodes if e.imitate else None for e in full.policies.learned] == [None, 20, 20]
    assert [e.imitate.episodes if e.imitate else None for e in quick.policies.learned] == [None, 2, 2]
    assert quick.policies.learned[1].imitate.epochs == full.policies.learned[1].imitate.epochs


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        ({"train_steps": 100, "train_steps_fraction": 0.5}, "not both"),
        ({"train_steps_fraction": 0}, "greater than 0"),
        ({"train_steps_fraction": 1.5}, "less than or equal to 1"),
    ],
)
def test_bad_medium_budget_is_named(scenario_data, write_scenario, budget, expected):
    scenario_data["budgets"]["medium"] = budget
    with pytest.raises(ScenarioError) as info:
        load_scenario(write_scenario(scenario_data))
    assert "budgets.medium" in str(info.value) and expected in str(info.value)


def test_medium_on_a_scenario_without_one_is_refused_and_writes_nothing(tmp_path, scenario_data):
    scenario = parse_scenario(yaml.safe_dump(scenario_data), "tiny.yaml")  # defines demo only
    with pytest.raises(ScenarioError) as info:
        scenario.with_budget("medium")
    assert "medium" in str(info.value) and "this scenario defines: full, demo" in str(info.value)
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "chemo/quick", "--budget", "medium", "--out", str(out)])
    assert result.exit_code == 2
    assert "--budget" in result.output and "'medium'" in result.output
    assert "defines: full, demo" in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_budget_names_no_longer_collide_with_scenario_names(
    scenario_data, write_scenario, tmp_path, monkeypatch
):
    """`chemo/quick --budget quick` once made `chemo-quick-quick-…`; the budget is `demo` now, the
    full budget adds nothing to the folder name, and the old name still works as an alias."""
    import json

    from fieldrl import api

    scenario_data["policies"]["learned"] = []
    path = write_scenario(scenario_data)
    made = {}
    for budget in ("demo", "quick", "full"):
        (tmp_path / budget).mkdir()
        monkeypatch.chdir(tmp_path / budget)
        made[budget] = api.create_run(path, budget=budget).path.resolve()
    assert made["demo"].name.startswith("tiny-demo-") and made["quick"].name.startswith("tiny-demo-")
    assert made["full"].name.startswith("tiny-2")  # tiny-<date>-<time>
    assert [json.loads((made[b] / "run.json").read_text())["budget"] for b in made] == [
        "demo",
        "demo",
        "full",
    ]
    # a scenario written with the old key keeps its caps; both keys at once is refused
    scenario_data["budgets"] = {"quick": {"eval_seeds": 2}}
    assert parse_scenario(yaml.safe_dump(scenario_data), "t.yaml").with_budget("demo").seeds.eval == [
        100,
        101,
    ]
    scenario_data["budgets"]["demo"] = {"eval_seeds": 2}
    with pytest.raises(ScenarioError, match="not both"):
        parse_scenario(yaml.safe_dump(scenario_data), "tiny.yaml")
    result = CliRunner().invoke(app, ["validate", str(path), "--budget", "quick"])
    assert result.exit_code == 0 and "budget demo" in " ".join(result.output.split())
