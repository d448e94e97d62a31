"""A learned entry's own ``params``: the controller's design (traffic's decision interval and reward)
chosen per policy and tunable by ``fieldrl tune``, never the world the policies are compared in."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import shipped_untuned
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.domains import get_domain
from fieldrl.errors import FieldrlError
from fieldrl.evaluation import runner, tuning
from fieldrl.reports.pdf import _own_params_text
from fieldrl.scenario import load_scenario

cli = CliRunner()


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FIELDRL_TRAFFIC_DIR", str(tmp_path_factory.getbasetemp() / "traffic-cache"))


def _traffic(own: dict | None = None) -> dict:
    """traffic/quick with its tuned values written in, its PPO running with ``own`` params."""
    data = shipped_untuned("traffic/quick")
    if own is not None:
        data["policies"]["learned"][0]["params"] = own
    return data


@pytest.mark.parametrize(
    ("own", "field", "says"),
    [
        ({"network": "grid"}, "params.network = 'grid'", "allowed: advice, decision_s, reward_weights"),
        ({"decision_s": 0}, "params.decision_s = 0", "greater than or equal to 1"),
        ({"reward_weights": {"speed": 1.0}}, "params.reward_weights", "unknown reward terms ['speed']"),
    ],
)
def test_an_entry_may_set_only_its_controller_s_own_settings(write_scenario, own, field, says):
    file = write_scenario(_traffic(own))
    result = cli.invoke(app, ["validate", str(file)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2, flat
    assert f"policies.learned[0].{field}" in flat and says in flat and "Traceback" not in flat


def test_validate_lists_an_entry_s_own_settings(write_scenario):
    result = cli.invoke(app, ["validate", str(write_scenario(_traffic({"decision_s": 10})))])
    assert result.exit_code == 0 and "PPO: its own settings: decision_s = 10" in result.output


def test_a_domain_without_policy_params_refuses_any(scenario_data, write_scenario):
    scenario_data["policies"]["learned"][0]["params"] = {"setting": "s2"}
    result = cli.invoke(app, ["validate", str(write_scenario(scenario_data))])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "params.setting" in flat and "allowed: none" in flat, flat


def test_own_params_reach_that_policy_only_and_the_report_says_so(write_scenario):
    data = _traffic({"decision_s": 10, "reward_weights": {"queue": 1.0}})
    data["policies"]["learned"][1].pop("params")  # an entry with no settings of its own
    scenario = load_scenario(write_scenario(data))
    data = scenario.model_dump(mode="json")
    _, _, ppo = runner._context(data, "default", "PPO")
    _, _, dqn = runner._context(data, "default", "DQN")
    _, _, fixed = runner._context(data, "default", "fixed-time")
    assert (ppo.decision_s, ppo.reward_weights) == (10, {"queue": 1.0})
    assert (fixed.decision_s, fixed.reward_weights) == (5, None)  # the scenario's
    dqn_own = next(e.params for e in scenario.policies.learned if e.label == "DQN")  # from its tuned file
    assert (dqn.decision_s, dqn.reward_weights) == (dqn_own["decision_s"], dqn_own["reward_weights"])
    from fieldrl.domains.traffic.env import TrafficEnv

    env = TrafficEnv(ppo)  # the simulator the entry trains and is tested in: one decision per 10 s
    try:
        env.reset(seed=1)
        start = env.time_s
        env.step({agent: 0 for agent in env.agents})
        assert env.time_s - start == 10
    finally:
        env.close()
    text = _own_params_text(scenario.policies.learned[0])
    assert "decision_s = 10" in text and "queue" in text and "other policies use the scenario's" in text
    assert _own_params_text(scenario.policies.learned[1]) == ""


def test_a_tuned_file_carries_params_and_records_what_it_replaced(write_scenario, tmp_path):
    tuned = {
        "algorithm": "maskable-ppo",
        "n_envs": 1,
        "hyperparameters": {"n_steps": 256},
        "params": {"decision_s": 15, "reward_weights": None},
        "study": {"study": "traffic-quick/default/PPO", "trials": 4},
    }
    (tmp_path / "ppo.yaml").write_text(yaml.safe_dump(tuned))
    data = _traffic({"decision_s": 10})
    data["policies"]["learned"][0]["tuned"] = "ppo.yaml"
    entry = load_scenario(write_scenario(data)).policies.learned[0]
    assert entry.params == {"decision_s": 15, "reward_weights": None}
    assert "params.decision_s" in entry.tuning.replaced


def test_the_search_space_holds_the_domain_s_tunable_params(write_scenario):
    domain = get_domain("traffic")
    scenario = load_scenario(write_scenario(_traffic({"decision_s": 10})))
    entry = scenario.policies.learned[0]
    space = tuning._space(entry, (), domain)
    assert space["params.decision_s"].choices == ("3", "5", "10", "15")
    assert "params.reward_weights" in space
    assert "params.decision_s" not in tuning._space(entry, ("decision_s",), domain)
    # the hand-set trial is told the labels of the values the entry runs with as written
    assert tuning._handset_params(scenario, "default", entry, domain, space) == {
        "params.decision_s": "10",
        "params.reward_weights": "auto",
    }
    hyper, own = tuning.split_sample({"gamma": 0.9, "params.reward_weights": "delay"}, domain)
    assert hyper == {"gamma": 0.9}
    assert own == {"reward_weights": {"vehicle_delay": 1.0, "pedestrian_delay": 1.0}}
    with pytest.raises(FieldrlError, match="--keep = 'decision'"):
        tuning._check_keep(scenario, ["PPO"], ("decision",))
    tuning._check_keep(scenario, ["PPO"], ("decision_s", "params.reward_weights", "policy_kwargs"))


@pytest.mark.slow
def test_tuning_trains_each_trial_with_its_sampled_params(write_scenario, tmp_path):
    data = _traffic({"decision_s": 10})
    data["params"]["periods"] = [  # 4 simulated minutes a day instead of 30: the test's time is SUMO's
        {"name": "peak", "duration_s": 240, "vehicles_main": 500, "vehicles_side": 250, "pedestrians": 300}
    ]
    file = write_scenario(data)
    result = tuning.tune(
        file, 2, out=tmp_path / "t", budget="demo", policies=["PPO"], train_steps=256, show_progress=False
    )
    frame = tuning.trials_frame(tmp_path / "t").sort_values("number").to_dict("records")
    first, second = frame
    assert first["handset"] and json.loads(first["policy_params"]) == {"decision_s": 10}  # the entry's own
    assert json.loads(first["params"])["params.decision_s"] == "10"
    sampled = json.loads(second["params"])
    domain = get_domain("traffic")
    assert json.loads(second["policy_params"]) == {
        name: domain.tunable_policy_params[name][sampled[f"params.{name}"]]
        for name in ("decision_s", "reward_weights")
    }
    study = result.studies["PPO"]
    written = yaml.safe_load((tmp_path / "t" / study["file"]).read_text())
    winner = first if study["best_is_handset"] else second
    assert written["params"] == json.loads(winner["policy_params"])


@pytest.mark.slow
def test_a_winning_hand_set_trial_keeps_the_params_an_earlier_study_chose(write_scenario, tmp_path):
    """The hand-set trial runs the entry as loaded, with the reward an earlier tuned file chose;
    the file written when it wins must reproduce that, not fall back to the reward the scenario
    itself wrote, which no trial scored."""
    data = _traffic({"decision_s": 10, "reward_weights": {"vehicle_delay": 1.0, "pedestrian_delay": 1.0}})
    data["params"]["periods"] = [
        {"name": "peak", "duration_s": 240, "vehicles_main": 500, "vehicles_side": 250, "pedestrians": 300}
    ]
    (tmp_path / "tuned").mkdir()
    earlier = {
        "algorithm": "maskable-ppo",
        "params": {"reward_weights": {"queue": 1.0}},
        "study": {"study": "an earlier study", "trials": 8},
    }
    (tmp_path / "tuned" / "earlier.yaml").write_text(yaml.safe_dump(earlier))
    data["policies"]["learned"][0]["tuned"] = "tuned/earlier.yaml"
    file = write_scenario(data)
    # one trial: the hand-set one, which therefore wins
    result = tuning.tune(
        file, 1, out=tmp_path / "t", budget="demo", policies=["PPO"], train_steps=256, show_progress=False
    )
    study = result.studies["PPO"]
    assert study["best_is_handset"]
    written = yaml.safe_load((tmp_path / "t" / study["file"]).read_text())
    assert written["params"] == {"decision_s": 10, "reward_weights": {"queue": 1.0}}
    (tmp_path / "tuned" / "again.yaml").write_text((tmp_path / "t" / study["file"]).read_text())
    data["policies"]["learned"][0]["tuned"] = "tuned/again.yaml"
    again = load_scenario(write_scenario(data, "again.yaml")).policies.learned[0]
    assert again.params["reward_weights"] == {"queue": 1.0}
