"""Stress maps (issue 40, part 1): a run's trained policies replayed on its held-out seeds while one
condition of the world moves away from training; nothing is retrained."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import TINY_SCENARIO, one_line_exit_2

import fieldrl
from fieldrl import api
from fieldrl.errors import ScenarioError
from fieldrl.evaluation import runner
from fieldrl.evaluation.store import RunFolder
from fieldrl.evaluation.stress import STRESS_RESULTS, StressSummary, read_stress_summary
from fieldrl.reports.stress import axis_sentence, front_sentence, point_verdicts
from fieldrl.scenario import builtin_scenarios, parse_scenario

ORDER = ["variant", "policy", "train_seed", "eval_seed", "episode", "metric"]


def _data(stress: dict | None = None) -> dict:
    data = copy.deepcopy(TINY_SCENARIO)
    data["params"] = {"preset": "s1", "max_t": 60}
    if stress is not None:
        data["stress"] = stress
    return data


@pytest.fixture(scope="module")
def stressed_run(tmp_path_factory) -> Path:
    """A tiny chemo run (PPO and two rules) whose scenario stresses observation noise after evaluation."""
    base = tmp_path_factory.mktemp("stressed")
    (base / "s.yaml").write_text(
        yaml.safe_dump(_data({"axes": [{"axis": "obs_noise", "points": [0.0, 0.5]}]}))
    )
    return fieldrl.run(base / "s.yaml", out=base / "run", show_progress=False).run_dir


@pytest.fixture
def run_copy(stressed_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(stressed_run, tmp_path / "run"))


def test_the_stress_section_runs_after_evaluation_and_the_report_shows_the_map(stressed_run):
    folder = RunFolder(stressed_run)
    stress = read_stress_summary(folder)
    assert stress is not None and list(stress.axes) == ["obs_noise"]
    setting = stress.axes["obs_noise"].variants["default"]
    assert [p.value for p in setting.points] == [0.0, 0.5] and setting.trained == 0.0
    assert (setting.best_learned, setting.best_heuristic) == ("PPO", "no treatment")
    recorded = folder.hashes()
    assert "figures/stress-obs_noise-default.png" in recorded and "report.pdf" in recorded
    assert STRESS_RESULTS in recorded


def test_the_point_the_run_trained_at_reproduces_the_plain_evaluation_exactly(stressed_run):
    plain = pd.read_parquet(stressed_run / "results.parquet").sort_values(ORDER).reset_index(drop=True)
    stressed = pd.read_parquet(stressed_run / STRESS_RESULTS)
    at_trained = stressed[stressed["point"] == 0.0].drop(columns=["axis", "point"])
    assert at_trained.sort_values(ORDER).reset_index(drop=True).equals(plain)
    moved = stressed[stressed["point"] == 0.5]
    ppo = moved[(moved["policy"] == "PPO") & (moved["metric"] == "return")]["value"].to_numpy()
    assert len(ppo) == len(plain[(plain["policy"] == "PPO") & (plain["metric"] == "return")])
    assert not (ppo == plain[(plain["policy"] == "PPO") & (plain["metric"] == "return")]["value"]).all()


def test_stress_trains_nothing_and_replays_only_what_is_not_done(run_copy, monkeypatch):
    import fieldrl.policies.learned as learned

    def no_training(*args, **kwargs):
        raise AssertionError("stress trained a model")

    monkeypatch.setattr(learned, "train_model", no_training)
    models = {p: p.read_bytes() for p in run_copy.glob("models/**/*") if p.is_file()}
    api.stress(run_copy, [("obs_noise", [0.0, 0.5]), ("missing_rate", [0.0, 0.5])], show_progress=False)
    assert {p: p.read_bytes() for p in run_copy.glob("models/**/*") if p.is_file()} == models
    played: list = []
    real = runner.run_eval_job
    monkeypatch.setattr(runner, "run_eval_job", lambda *a, **k: played.append(a) or real(*a, **k))
    stress = api.stress(run_copy, [("obs_noise", [0.0, 0.5])], show_progress=False)
    assert played == []  # every job was kept from the first time
    assert sorted(stress.axes) == ["missing_rate", "obs_noise"]  # axes stressed before stay on the map


def test_a_new_evaluation_drops_stress_results_made_before_it(run_copy):
    api.evaluate(run_copy, show_progress=False)
    assert read_stress_summary(RunFolder(run_copy)) is None and not (run_copy / "stress").exists()


@pytest.mark.parametrize(
    ("axis", "pieces"),
    [
        (
            "bogus",
            ["--axis = 'bogus'", "unknown stress axis", "allowed: missing_rate, obs_noise, pkpd_noise"],
        ),
        ("obs_noise=0,7", ["--axis = 'obs_noise=0,7' (value 7)", "allowed: 0 to 1"]),
        ("obs_noise=0.5,0.1", ["--axis = 'obs_noise=0.5,0.1'", "increasing"]),
        ("obs_noise=a,b", ["--axis = 'obs_noise=a,b'", "must be numbers"]),
        ("obs_noise=0.1", ["at least two values"]),
    ],
)
def test_a_bad_axis_or_range_is_one_line_and_writes_nothing(run_copy, axis, pieces):
    before = json.loads((run_copy / "manifest.json").read_text())
    one_line_exit_2(["stress", str(run_copy), "--axis", axis, "--quiet"], *pieces)
    assert json.loads((run_copy / "manifest.json").read_text()) == before


def test_stress_on_a_run_not_yet_evaluated_is_one_line(tmp_path, write_scenario):
    run_dir = fieldrl.train(write_scenario(_data()), out=tmp_path / "run", show_progress=False)
    one_line_exit_2(["stress", str(run_dir), "--quiet"], "summary.json", "evaluate the run first")


@pytest.mark.parametrize(
    ("stress", "field", "says"),
    [
        ({"axes": [{"axis": "dose"}]}, "stress.axes[0].axis", "unknown stress axis"),
        (
            {"axes": [{"axis": "obs_noise", "points": [0.0, 2.0]}]},
            "stress.axes[0].points[1]",
            "allowed: 0 to 1",
        ),
        ({"axes": [{"axis": "obs_noise", "points": [0.2, 0.1]}]}, "stress.axes[0].points", "increase"),
        ({"axes": [{"axis": "obs_noise"}, {"axis": "obs_noise"}]}, "stress", "twice"),
        ({"axes": [{"axis": "obs_noise"}], "variants": ["s9"]}, "stress.variants[0]", "unknown variant"),
    ],
)
def test_a_scenario_s_stress_section_is_checked_at_validation(stress, field, says):
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(yaml.safe_dump(_data(stress)), "s.yaml", build=False)
    assert caught.value.field.startswith(field) and says in str(caught.value), str(caught.value)


# ----------------------------------------------------------------------------- in words


def _summary(differences: list[tuple[float, float, float]], values: list[float]) -> StressSummary:
    """A stress summary whose learned policy differs from the standard one by ``differences``."""

    def stats(mean: float) -> dict:
        interval = {"value": mean, "low": mean, "high": mean}
        return {"return": {"mean": interval, "iqm": interval, "n_train_seeds": 1, "n_eval_seeds": 30}}

    points = []
    for value, (mid, low, high) in zip(values, differences, strict=True):
        diff = {"difference": {"value": mid, "low": low, "high": high}}
        diff["relative_percent"] = {"value": mid, "low": low, "high": high}
        points.append(
            {
                "value": value,
                "policies": {"PPO": stats(100 + mid), "rule": stats(100.0)},
                "comparison": {"return": diff},
            }
        )
    setting = {"trained": values[0], "best_heuristic": "rule", "best_learned": "PPO", "points": points}
    axis = {"label": "Observation noise", "unit": "", "fmt": "g", "variants": {"default": setting}}
    return StressSummary.model_validate(
        {
            "primary_kpi": "return",
            "primary_label": "Return",
            "primary_unit": "",
            "higher_is_better": True,
            "confidence": 0.95,
            "axes": {"obs_noise": axis},
        }
    )


def test_where_the_verdict_flips_is_named_in_words():
    stress = _summary([(5, 2, 8), (4, 1, 7), (1, -2, 4), (-6, -9, -3)], [0.0, 0.1, 0.2, 0.5])
    assert point_verdicts(stress, "obs_noise", "default") == ["ahead", "ahead", "level", "behind"]
    sentence = axis_sentence(stress, "obs_noise", "default")
    assert sentence == (
        "Against rule, PPO is ahead at 0–0.1, level at 0.2 and behind at 0.5 (observation noise; trained at "
        "0): the verdict flips between 0.1 and 0.2 and between 0.2 and 0.5."
    )
    front = front_sentence(stress, "default")
    assert front is not None and "PPO against rule on return: observation noise: ahead at 0–0.1" in front


def test_a_verdict_that_never_flips_says_so_over_the_whole_range():
    stress = _summary([(1, -2, 4), (0.5, -3, 4)], [0.0, 0.5])
    assert axis_sentence(stress, "obs_noise", "default") == (
        "PPO is level with rule at every tested observation noise (0–0.5; trained at 0)."
    )


# ----------------------------------------------------------------------------- every domain's axes


@pytest.mark.parametrize("ref", builtin_scenarios())
def test_every_axis_at_the_trained_value_leaves_the_params_as_they_were(ref):
    """The point a run trained at must be the plain evaluation again: the world there is the scenario's.
    And every built-in scenario that some axis can move is stressed, so that its report has a map."""
    from fieldrl.domains import get_domain
    from fieldrl.scenario import load_scenario, stressed_params

    scenario = load_scenario(ref, build=False)
    domain = get_domain(scenario.domain)
    raws = stressed_params(scenario)
    movable = {name: axis for name, axis in domain.stress_axes.items() if not any(map(axis.problem, raws))}
    assert (scenario.stress is not None) == bool(movable), (
        f"{ref}: stress section {scenario.stress}, axes {movable}"
    )
    for raw in raws:
        params = domain.params_model.model_validate(raw)
        for name, axis in movable.items():
            again = domain.params_model.model_validate(axis.apply(raw, axis.trained(params)))
            assert again == params, (ref, name)


# ----------------------------------------------------------------------------- the run folder's promises


def test_a_stress_folder_that_links_outside_the_run_is_refused_and_left_alone(run_copy, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine\n")
    shutil.rmtree(run_copy / "stress")
    (run_copy / "stress").symlink_to(outside)
    one_line_exit_2(
        ["stress", str(run_copy), "--axis", "obs_noise=0,0.5", "--quiet"], "outside the run folder"
    )
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]


def test_a_stress_summary_replaced_by_a_fifo_is_refused_at_once(run_copy):
    import os
    import subprocess
    import sys

    summary = run_copy / "stress" / "summary.json"
    summary.unlink()
    os.mkfifo(summary)
    done = subprocess.run(
        [sys.executable, "-m", "fieldrl.cli", "report", str(run_copy)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "summary.json" in done.stderr and "named pipe" in done.stderr, done.stderr


def test_a_stress_point_is_typed_and_its_nan_numbers_are_written_as_null_as_always():
    import math

    import numpy as np

    from fieldrl.evaluation.stats import Bootstrap, describe, paired_difference
    from fieldrl.evaluation.stress import StressPoint
    from fieldrl.results import Described, Paired

    boot = Bootstrap(3, 50)
    nothing, three = np.zeros((0, 3)), np.array([[1.0, 2.0, 3.0]])  # a policy without values, one with
    point = StressPoint(
        value=0.5,
        policies={
            "lost": {"return": describe(nothing, boot, 0.95)},
            "kept": {"return": describe(three, boot, 0.95)},
        },
        comparison={"return": paired_difference(nothing, three, boot, 0.95)},
    )
    written = point.model_dump(mode="json")
    assert written["policies"]["lost"]["return"]["mean"] == {"value": None, "low": None, "high": None}
    assert written["comparison"]["return"]["difference"]["value"] is None
    assert written["policies"]["kept"]["return"]["mean"]["value"] == 2.0
    assert list(written["policies"]["kept"]["return"]) == ["mean", "iqm", "n_train_seeds", "n_eval_seeds"]
    read = StressPoint.model_validate(json.loads(json.dumps(written)))
    lost = read.described("lost", "return")
    assert isinstance(lost, Described) and math.isnan(lost.mean.value) and math.isnan(lost.mean.low)
    compared = read.compared("return")
    assert isinstance(compared, Paired) and math.isnan(compared.difference.value)
    assert read.cases("return") == 3 and read.described("nobody", "return") is None
    assert read.results().stat("kept", "return") == point.described("kept", "return").mean
