"""The chemo/memory study runs end to end at its demo budget, with its recurrent-vs-feed-forward verdict."""

from __future__ import annotations

import pandas as pd
import yaml
from conftest import shipped_untuned
from pypdf import PdfReader
from typer.testing import CliRunner

from fieldrl.cli import app


def test_memory_study_quick_budget_reports_recurrent_vs_feed_forward(tmp_path):
    # chemo/memory as shipped, smaller: its stress section left out (test_stress.py runs one), a
    # quarter of the demo budget's steps, with RecurrentPPO's rollout (16 envs x 256 steps is 4,096
    # steps) and the off-policy learners' first update (2,000 steps) brought within them; as shipped
    # this was the suite's longest test (5.5 min on 2 cores)
    data = shipped_untuned("chemo/memory")
    del data["stress"]
    data["budgets"]["demo"] |= {"train_steps": 1024, "validation_seeds": 2, "eval_seeds": 3}
    for entry in data["policies"]["learned"]:
        hyperparameters = entry["hyperparameters"]
        if "learning_starts" in hyperparameters:
            hyperparameters["learning_starts"] = min(hyperparameters["learning_starts"], 256)
    recurrent = next(entry for entry in data["policies"]["learned"] if entry["name"] == "RecurrentPPO")
    recurrent["n_envs"] = 4
    scenario = tmp_path / "memory.yaml"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "memory"
    result = CliRunner().invoke(app, ["run", str(scenario), "--budget", "demo", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    results = pd.read_parquet(out / "results.parquet")
    assert set(results["variant"]) == {"s1", "s5"}
    assert {"TD3", "SAC", "LSTM-TD3", "PPO", "RecurrentPPO"} <= set(results["policy"])
    text = " ".join(" ".join((p.extract_text() or "").split()) for p in PdfReader(out / "report.pdf").pages)
    assert "LSTM-TD3 compared with TD3" in text and "RecurrentPPO compared with PPO" in text
    assert "LSTM-TD3 against TD3" in text  # the gap chart's section
