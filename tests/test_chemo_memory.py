"""The chemo/memory study runs end to end at its demo budget, with its recurrent-vs-feed-forward verdict."""

from __future__ import annotations

import pandas as pd
from pypdf import PdfReader
from typer.testing import CliRunner

from fieldrl.cli import app


def test_memory_study_quick_budget_reports_recurrent_vs_feed_forward(tmp_path):
    out = tmp_path / "memory"
    result = CliRunner().invoke(
        app, ["run", "chemo/memory", "--budget", "demo", "--out", str(out), "--quiet"]
    )
    assert result.exit_code == 0, result.output
    results = pd.read_parquet(out / "results.parquet")
    assert set(results["variant"]) == {"s1", "s5"}
    assert {"TD3", "SAC", "LSTM-TD3", "PPO", "RecurrentPPO"} <= set(results["policy"])
    text = " ".join(" ".join((p.extract_text() or "").split()) for p in PdfReader(out / "report.pdf").pages)
    assert "LSTM-TD3 compared with TD3" in text and "RecurrentPPO compared with PPO" in text
    assert "LSTM-TD3 against TD3" in text  # the gap chart's section
