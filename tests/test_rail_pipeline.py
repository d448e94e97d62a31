"""Rail dispatchers on held-out seeds, and the rail/quick scenario end to end through the CLI."""

from __future__ import annotations

import json

import numpy as np
from pypdf import PdfReader
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.domains.rail import DOMAIN
from fieldrl.domains.rail.params import RailParams
from fieldrl.evaluation.runner import run_episodes


def _run(name: str, params: RailParams, seeds: list[int]) -> dict[str, np.ndarray]:
    spec = DOMAIN.heuristics[name]
    policy = spec.build(spec.settings_model(), params, name)
    kpis, _ = run_episodes(DOMAIN, params, policy, seeds)
    return kpis


def test_deadlock_avoiding_dispatcher_never_deadlocks_and_beats_shortest_path():
    params, seeds = RailParams(level=1), list(range(500, 506))
    base = _run("greedy-shortest-route", params, seeds)
    safe = _run("deadlock-avoiding", params, seeds)
    reroute = _run("priority-reroute", params, seeds)
    assert base["deadlocked"].mean() > 10  # trains leaving at once meet head-on
    assert safe["deadlocked"].max() == 0 and reroute["deadlocked"].max() == 0
    assert safe["arrived"].mean() > base["arrived"].mean() + 15
    assert 0 < reroute["normalized_reward"].min() <= reroute["normalized_reward"].max() <= 1


def test_dispatchers_act_the_same_way_in_the_monolithic_env():
    seeds = [700, 701]
    semi = _run("deadlock-avoiding", RailParams(level=0, mode="semi"), seeds)
    mono = _run("deadlock-avoiding", RailParams(level=0, mode="monolithic"), seeds)
    assert mono["deadlocked"].max() == 0
    assert abs(semi["arrived"].mean() - mono["arrived"].mean()) <= 100 / 7 + 1e-9


def test_rail_quick_scenario_runs_end_to_end(tmp_path):
    out = tmp_path / "rail"
    result = CliRunner().invoke(app, ["run", "rail/quick", "--budget", "demo", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    text = " ".join(" ".join((p.extract_text() or "").split()) for p in PdfReader(out / "report.pdf").pages)
    for words in (
        "Trains arrived and deadlocks, level by level",
        "Rail map",
        "deadlock-avoiding",
        "priority reroute",
        "PPO (shared)",
        "PPO + imitation",
        "PPO + dispatcher advice",
        "sees what the priority dispatcher",  # the rail pages say what the advice is
        "Flatland 3 normalised reward",
        "semi-hierarchical",
        "semi-hierarchical-unshielded",
        "monolithic",
    ):
        assert words in text, words
    assert (out / "figures" / "rail-levels.png").exists()
    # the warm start really cloned the priority dispatcher, in every variant
    cloned = sorted(out.glob("models/*/PPO-imitation/seed-0/imitation.json"))
    assert len(cloned) == 3
    # on the demo budget's two demonstration episodes
    assert all(json.loads(path.read_text())["episodes"] == 2 for path in cloned)
