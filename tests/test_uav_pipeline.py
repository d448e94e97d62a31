"""End to end: `fieldrl run uav/quick --budget demo` through the CLI, and the PDF a stakeholder reads."""

from __future__ import annotations

import json

from pypdf import PdfReader
from typer.testing import CliRunner

from fieldrl.cli import app


def test_uav_quick_runs_end_to_end_and_reports_every_system(tmp_path):
    out = tmp_path / "uav"
    result = CliRunner().invoke(app, ["run", "uav/quick", "--budget", "demo", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    text = " ".join(" ".join((p.extract_text() or "").split()) for p in PdfReader(out / "report.pdf").pages)
    for words in (
        "UAV offloading: the systems side by side",
        "PPO (full pipeline)",
        "PPO (MARL baseline, independent learners)",
        "each UAV an independent learner with its own networks",
        "PPO (pipeline, no rectifier)",
        "greedy rate",
        "Where the UAVs flew",
        "Ablation and solver times",
        "Task success rate",
    ):
        assert words in text, words
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["variants"]) == {"pipeline", "no-rectifier", "marl"}
    pipeline = summary["variants"]["pipeline"]["policies"]["PPO"]
    assert pipeline["lp_ms"]["mean"]["value"] > 0 and pipeline["socp_ms"]["mean"]["value"] > 0
    marl = summary["variants"]["marl"]["policies"]["PPO"]
    assert marl["lp_ms"]["mean"]["value"] == 0 and marl["socp_ms"]["mean"]["value"] == 0
    assert (out / "figures" / "uav-map.png").is_file()
