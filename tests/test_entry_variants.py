"""A learned entry limited to some settings (``variants:``): trained, tested, estimated and tuned
only there (uav/dense-city's warm start from the fixed rule, which the MARL setting has no use for)."""

from __future__ import annotations

import pytest
from conftest import shipped_untuned
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.errors import FieldrlError
from fieldrl.estimates import workload
from fieldrl.evaluation import runner, tuning
from fieldrl.scenario import load_scenario

pytestmark = pytest.mark.needs("uav")
cli = CliRunner()
WARM = "PPO (fixed-3 warm start)"


def _dense_city() -> dict:
    return shipped_untuned("uav/dense-city")


def _warm(data: dict) -> dict:
    return next(e for e in data["policies"]["learned"] if e["name"] == WARM)


def test_the_shipped_warm_start_runs_only_in_the_pipeline_load_settings():
    scenario = load_scenario("uav/dense-city")
    jobs = runner.train_jobs(scenario)
    warm = {j.variant for j in jobs if j.policy == WARM}
    assert warm == {"load-2", "load-1.5", "load-3"}
    assert {j.variant for j in jobs if j.policy == "PPO"} == set(scenario.variant_names)
    evaluated = {j.variant for j in runner.eval_jobs(scenario) if j.policy == WARM}
    assert evaluated == warm
    load = workload(scenario)
    n_train = len(scenario.seeds.train)
    assert load.training_runs == (len(scenario.variant_names) + 3) * n_train
    assert load.steps_by_policy[WARM] == 3 * n_train * _warm(_dense_city())["train_steps"]


def test_validate_says_where_a_limited_entry_runs():
    result = cli.invoke(app, ["validate", "uav/dense-city"])
    assert result.exit_code == 0 and f"{WARM}: only in load-2, load-1.5, load-3" in result.output


def test_an_unknown_setting_is_one_line_naming_the_field(write_scenario):
    data = _dense_city()
    _warm(data)["variants"] = ["load-2", "load-9"]
    result = cli.invoke(app, ["validate", str(write_scenario(data))])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "policies.learned[1].variants[1] = 'load-9'" in flat, flat
    assert "unknown variant; allowed: load-2," in flat and "Traceback" not in flat


def test_a_budget_that_leaves_an_entry_no_setting_is_refused(write_scenario):
    data = _dense_city()
    _warm(data)["variants"] = ["load-3"]
    result = cli.invoke(app, ["validate", str(write_scenario(data)), "--budget", "demo"])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "budgets.demo.variants = ['load-2', 'load-2-marl']" in flat, flat
    assert f"leaves {WARM} no setting to run in" in flat


def test_tuning_an_entry_in_a_setting_it_does_not_run_in_is_refused():
    with pytest.raises(FieldrlError, match=r"--variant = 'load-2-marl': PPO \(fixed-3 warm start\) does not"):
        tuning.tune("uav/dense-city", 1, policies=[WARM], variant="load-2-marl", show_progress=False)


def test_loading_an_entry_in_a_setting_it_did_not_run_in_is_refused(tmp_path):
    from fieldrl import api

    run_dir = api.create_run("uav/dense-city", tmp_path / "run", budget="demo").path
    ran_in = r"variant = 'load-2-marl': PPO \(fixed-3 warm start\) ran in: load-2$"
    with pytest.raises(FieldrlError, match=ran_in):
        api.load_model(run_dir, WARM, variant="load-2-marl")
    unknown = r"policy = 'PPO \(warm\)': learned policies of this run: PPO, PPO \(fixed"
    with pytest.raises(FieldrlError, match=unknown):
        api.load_model(run_dir, "PPO (warm)")
