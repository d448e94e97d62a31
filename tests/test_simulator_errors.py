"""A simulator error is contained (issue 22, defect 5): the env is closed and libsumo freed, the
episode is retried once on a fresh simulator and then recorded as failed, the policies after it
are unaffected, and a run with failed episodes says so on page 1 and exits with status 3."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import fieldrl
from fieldrl.cli import app

cli = CliRunner()
BAD_SEED = 1001


def _traffic_scenario() -> dict:
    """Two heuristics on one junction for two simulated minutes: an episode takes a fraction of a second."""
    period = {"name": "p", "duration_s": 120, "vehicles_main": 300, "vehicles_side": 100, "pedestrians": 50}
    return {
        "name": "sumo-errors",
        "domain": "traffic",
        "params": {"network": "single", "periods": [period]},
        "policies": {"heuristics": [{"use": "fixed-time"}, {"use": "max-pressure"}]},
        "seeds": {"train": [0], "eval": {"start": 1000, "count": 3}},
    }


@pytest.fixture
def sumo_failing(monkeypatch):
    """Make SUMO raise mid-episode on held-out seed ``BAD_SEED``: every time, or only the first time."""
    import libsumo

    from fieldrl.domains.traffic.env import TrafficEnv

    attempts: dict[int, int] = {}
    mode = {"always": True}
    reset, step = TrafficEnv.reset, TrafficEnv.step

    def failing_reset(self, seed=None, options=None):
        self._probe_seed = seed
        if seed == BAD_SEED:
            attempts[seed] = attempts.get(seed, 0) + 1
        self._probe_steps = 0
        return reset(self, seed=seed, options=options)

    def failing_step(self, actions):
        self._probe_steps += 1
        first_try = attempts.get(BAD_SEED, 0) % 2 == 1
        if self._probe_seed == BAD_SEED and self._probe_steps == 3 and (mode["always"] or first_try):
            raise libsumo.TraCIException("Vehicle 'v7' is not known")
        return step(self, actions)

    monkeypatch.setattr(TrafficEnv, "reset", failing_reset)
    monkeypatch.setattr(TrafficEnv, "step", failing_step)
    return attempts, mode


def test_a_sumo_error_fails_only_its_episode_and_frees_libsumo(sumo_failing, tmp_path: Path):
    attempts, _ = sumo_failing
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(_traffic_scenario(), sort_keys=False))
    result = fieldrl.run(file, out=tmp_path / "run", show_progress=False)
    failed = {(f.policy, f.eval_seed) for f in result.summary.failed_episodes}
    assert failed == {("fixed-time", BAD_SEED), ("max-pressure", BAD_SEED)}
    assert all(
        "TraCIException: Vehicle 'v7' is not known" in f.reason for f in result.summary.failed_episodes
    )
    assert attempts[BAD_SEED] == 4  # each policy: the episode, then one retry on a fresh simulator
    seen = result.results.groupby("policy")["eval_seed"].unique()
    assert {p: sorted(s) for p, s in seen.items()} == {
        "fixed-time": [1000, 1002],
        "max-pressure": [1000, 1002],
    }
    from fieldrl.domains.traffic import sumo

    assert sumo._owner() is None  # nothing holds libsumo after the run


def test_a_transient_sumo_error_is_retried_once_and_then_succeeds(sumo_failing, tmp_path: Path):
    attempts, mode = sumo_failing
    mode["always"] = False
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(_traffic_scenario(), sort_keys=False))
    result = fieldrl.run(file, out=tmp_path / "run", show_progress=False)
    assert result.summary.failed_episodes == []
    assert sorted(set(result.results["eval_seed"])) == [1000, 1001, 1002]
    assert attempts[BAD_SEED] == 4


def test_a_run_with_failed_episodes_exits_3_and_says_so_on_page_one(scenario_data, tmp_path, monkeypatch):
    from pypdf import PdfReader

    from fieldrl.domains.chemo import env as chemo_env
    from fieldrl.domains.chemo.env import ChemoEvalEnvs

    class Crashing(ChemoEvalEnvs):
        def step(self, actions):
            if 102 in self.seeds:
                raise RuntimeError("solver diverged")
            return super().step(actions)

    monkeypatch.setattr(chemo_env, "ChemoEvalEnvs", Crashing)
    data = copy.deepcopy(scenario_data)
    data["policies"]["learned"] = []
    data["seeds"]["eval"] = {"start": 100, "count": 4}
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(data, sort_keys=False))
    result = cli.invoke(app, ["run", str(file), "--out", str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 3, result.output
    assert "2 held-out episode(s) ended in a simulator error" in " ".join(result.output.split())
    page_one = " ".join((PdfReader(tmp_path / "run" / "report.pdf").pages[0].extract_text() or "").split())
    assert "2 of 8 held-out episodes failed" in page_one


def test_a_run_whose_every_episode_failed_still_reports_and_exits_3(scenario_data, tmp_path, monkeypatch):
    """Once `KeyError: None` in the report: no policy had a best value to quote."""
    from fieldrl.domains.chemo import env as chemo_env
    from fieldrl.domains.chemo.env import ChemoEvalEnvs

    class Dead(ChemoEvalEnvs):
        def step(self, actions):
            raise RuntimeError("licence server unreachable")

    monkeypatch.setattr(chemo_env, "ChemoEvalEnvs", Dead)
    data = copy.deepcopy(scenario_data)
    data["policies"]["learned"] = []
    data["seeds"]["eval"] = {"start": 100, "count": 2}
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(data, sort_keys=False))
    result = cli.invoke(app, ["run", str(file), "--out", str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output and (tmp_path / "run" / "report.pdf").is_file()
