"""End to end: `fieldrl run taxiway/quick --budget demo` through the CLI, and the PDF a manager reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from pypdf import PdfReader
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.domains import get_domain
from fieldrl.evaluation.runner import run_episodes
from fieldrl.policies.base import Policy


def pdf_text(path: Path) -> str:
    return " ".join(" ".join((page.extract_text() or "").split()) for page in PdfReader(path).pages)


def test_quick_scenario_runs_and_reports(tmp_path):
    out = tmp_path / "quick"
    result = CliRunner().invoke(
        app, ["run", "taxiway/quick", "--budget", "demo", "--out", str(out), "--quiet"]
    )
    assert result.exit_code == 0, result.output
    text = pdf_text(out / "report.pdf")
    for words in (
        "Conflicts per 100 movements",
        "Mean taxi time",
        "prioritized planning",
        "CBS",
        "MaskablePPO + shield",
        "The airport, taxi paths and conflicts",
        "Key figures by traffic density",
        "For operations",
        "Getting traffic through",
        "Target check for MaskablePPO + shield against prioritized planning",
    ):
        assert words in text, words
    results = pd.read_parquet(out / "results.parquet")
    planner = results[
        (results["policy"] == "prioritized planning") & (results["metric"] == "conflicts_per_100")
    ]
    assert len(planner) == 3 and (planner["value"] == 0).all()
    assert (out / "figures" / "taxiway-map-default.png").exists()


class _HoldEveryone(Policy):
    name = "hold"

    def reset(self, n_envs: int) -> None:
        pass

    def act(self, obs, episode_start):
        return np.zeros(obs.shape[:2], dtype=int)


def test_trace_marks_the_aircraft_stranded_when_the_period_ends():
    domain = get_domain("taxiway")
    params = domain.params_model(layout="small", density="high", horizon_min=5.0, drain_min=1.0)
    kpis, trace = run_episodes(domain, params, _HoldEveryone(), [1, 2])
    stuck = trace[trace["kind"] == "stranded"]
    assert (kpis["completed_pct"] == 0).all()
    assert set(stuck["episode"]) == {0, 1} and stuck[["x", "y"]].notna().all().all()
