"""traffic/quick end to end through the CLI: train, evaluate on held-out demand, write the PDF."""

from __future__ import annotations

import json
import math

import pandas as pd
import yaml
from conftest import shipped_untuned
from pypdf import PdfReader
from typer.testing import CliRunner

from fieldrl.cli import app


def test_traffic_quick_runs_end_to_end_and_reports_both_modes(tmp_path, monkeypatch):
    monkeypatch.setenv("FIELDRL_TRAFFIC_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    # traffic/quick as shipped but for its stress section (test_traffic_stress.py runs that): the
    # stress replays would double this, the suite's longest test; and with a third of the demo
    # budget's steps (sized for DQN, whose tuned values start learning at 2,000 steps and update the
    # target every 5,000), DQN's two brought within them
    data = shipped_untuned("traffic/quick")
    del data["stress"]
    data["budgets"]["demo"]["train_steps"] = 3000
    dqn = next(entry for entry in data["policies"]["learned"] if entry["algorithm"] == "dqn")
    dqn["hyperparameters"] |= {"learning_starts": 500, "target_update_interval": 1000}
    scenario = tmp_path / "quick.yaml"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(app, ["run", str(scenario), "--budget", "demo", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    text = " ".join(" ".join((p.extract_text() or "").split()) for p in PdfReader(out / "report.pdf").pages)
    for words in (
        "Mean person delay (all road users)",
        "longest pedestrian wait",
        "Jain's index",
        "Finding for the traffic engineer",
        "Through the peak",
        "Phase usage",
        "fixed-time",
        "ped-actuated",
        "PPO",
        "PPO (Webster warm start)",
        "Warm start: behaviour-cloned from Webster",
        "PPO + Webster advice",
        "Webster (fieldrl controller)",
        "sees which stage Webster's timing",  # the traffic pages say what the advice is
        "DQN",
    ):
        assert words in text, words
    # the requested comparisons on 2 held-out cases: no claim of confidence intervals
    assert "PPO against fixed-time" in text and "mean differences only, too few held-out cases" in text
    assert "with 95 % confidence intervals" not in text
    results = pd.read_parquet(out / "results.parquet")
    delays = results[results["metric"] == "person_delay_mean"].groupby("policy")["value"].mean()
    assert (delays > 0).all() and len(delays) == 11
    # every policy saw the same held-out demand days
    seeds = results.groupby("policy")["eval_seed"].apply(lambda s: tuple(sorted(set(s))))
    assert seeds.nunique() == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["primary_kpi"] == "person_delay_mean"
    # validation during training: the in-process training env holds libsumo, so validation episodes
    # run over TraCI; every learned policy was selected on finite validation scores
    for policy, seeds in summary["validation"]["learned"]["default"].items():
        selected = seeds["0"]["selected"]
        assert selected is not None and math.isfinite(selected["value"]), policy
