"""A user's own held-out patients: a CSV cohort named by the scenario (issue 23)."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from pydantic import ValidationError
from pypdf import PdfReader
from typer.testing import CliRunner

from fieldrl import api
from fieldrl.cli import app
from fieldrl.domains.chemo.cohort import MAX_COHORT_ROWS, load_cohort
from fieldrl.domains.chemo.domain import ChemoDomain
from fieldrl.domains.chemo.env import ChemoEvalEnvs
from fieldrl.domains.chemo.params import ChemoParams
from fieldrl.errors import FieldrlError, ScenarioError
from fieldrl.scenario import load_scenario
from fieldrl.simulators.chemo import NOMINAL_PARAMS, PRESETS

DOMAIN = ChemoDomain()
NOMINAL_ROW = ",".join(str(v) for v in NOMINAL_PARAMS.values())
HEADER = ",".join(NOMINAL_PARAMS)


def _csv(tmp_path: Path, text: str, name: str = "patients.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return path


def _rollout(params: ChemoParams, seeds: list[int], dose: float = 0.3, steps: int = 80) -> np.ndarray:
    """States ``(steps + 1, n, 4)`` of the held-out episodes on ``seeds`` under a constant dose."""
    envs = DOMAIN.make_eval_envs(DOMAIN.held_out_params(params, seeds), seeds, seeds)
    envs.reset()
    states = [envs.initial_info["state"]]
    for _ in range(steps):
        states.append(envs.step(np.full(len(seeds), dose))[4]["state"])
    return np.array(states)


# ----------------------------------------------------------------------------- semantics


def test_two_distinct_patients_give_different_courses_on_the_same_seed(tmp_path: Path):
    cohort = _csv(tmp_path, "r1,a2\n1.5,0.3\n0.8,0.6\n")
    params = ChemoParams(preset="s4", cohort_file=str(cohort))
    first = _rollout(params, [7, 8])
    # swap the rows: the same seeds now meet the other patient
    swapped = _csv(tmp_path, "r1,a2\n0.8,0.6\n1.5,0.3\n", "swapped.csv")
    second = _rollout(ChemoParams(preset="s4", cohort_file=str(swapped)), [7, 8])
    assert not np.allclose(first[:, 0], second[:, 0])
    assert not np.allclose(first[:, 1], second[:, 1])


def test_a_nominal_row_is_the_preset_patient_without_its_parameter_spread(tmp_path: Path):
    cohort = _csv(tmp_path, f"{HEADER}\n{NOMINAL_ROW}\n{NOMINAL_ROW}\n")
    with_cohort = _rollout(ChemoParams(preset="s4", cohort_file=str(cohort)), [3, 4])
    # the same seeds without a cohort and without PK/PD spread: identical noise, nominal patient
    noise = PRESETS["s4"]
    envs = ChemoEvalEnvs([3, 4], type(noise)(noise.obs_noise, noise.state_noise, 0.0, noise.missing_rate))
    envs.reset()
    states = [envs.initial_info["state"]]
    for _ in range(80):
        states.append(envs.step(np.full(2, 0.3))[4]["state"])
    np.testing.assert_array_equal(with_cohort, np.array(states))


def test_a_nominal_row_in_the_noise_free_setting_is_the_nominal_patient(tmp_path: Path):
    cohort = _csv(tmp_path, "r1\n1.5\n")  # every other column nominal too
    with_cohort = _rollout(ChemoParams(preset="s1", cohort_file=str(cohort)), [11])
    without = _rollout(ChemoParams(preset="s1"), [11])
    np.testing.assert_array_equal(with_cohort, without)


def test_initial_state_columns_set_the_patient_start(tmp_path: Path):
    cohort = _csv(tmp_path, "N0,T0,I0\n0.95,0.4,0.01\n")
    states = _rollout(ChemoParams(preset="s2", cohort_file=str(cohort)), [5], steps=1)
    np.testing.assert_allclose(states[0, 0], [0.95, 0.4, 0.01, 0.0])


def test_validation_and_training_patients_still_come_from_the_preset(tmp_path: Path):
    cohort = _csv(tmp_path, "r1\n0.5\n")
    params = ChemoParams(preset="s2", cohort_file=str(cohort))
    unbound = DOMAIN.make_eval_envs(params, [5], [5])  # validation seeds are never bound
    unbound.reset()
    assert unbound._batch.params[0, 0] != 0.5
    train = DOMAIN.make_train_vec_env(params, 2, seed=0)
    train.reset()
    assert not np.any(train._batch.params[:, 0] == 0.5)


def test_fewer_patients_than_held_out_seeds_is_refused(tmp_path: Path):
    cohort = _csv(tmp_path, "r1\n1.0\n1.2\n")
    with pytest.raises(ValueError, match="has 2 patients but the scenario has 3 held-out seeds"):
        DOMAIN.held_out_params(ChemoParams(cohort_file=str(cohort)), [1, 2, 3])


# ----------------------------------------------------------------------------- bad files


@pytest.mark.parametrize(
    ("name", "content", "pieces"),
    [
        ("p.txt", "r1\n1.0\n", ["p.txt", "must end in .csv"]),
        ("p.csv", "", ["p.csv", "empty"]),
        ("p.csv", "r1,c2\n", ["p.csv", "no patients after the header"]),
        ("p.csv", "r1,dose\n1,2\n", ["p.csv line 1", "unknown column 'dose'", "allowed", "N0"]),
        ("p.csv", "r1,r1\n1,2\n", ["p.csv line 1", "'r1' appears more than once"]),
        ("p.csv", "r1,c2\n1.0,0.5\n1.1,abc\n", ["p.csv line 3, column c2", "'abc' is not a number"]),
        ("p.csv", "r1\nnan\n", ["line 2, column r1", "'nan' is out of range", "finite number >= 0"]),
        ("p.csv", "r1\ninf\n", ["line 2, column r1", "'inf' is out of range"]),
        ("p.csv", "alpha\n0\n", ["line 2, column alpha", "'0' is out of range", "> 0"]),
        ("p.csv", "c2\n-0.1\n", ["line 2, column c2", "'-0.1' is out of range", ">= 0 and <= 100"]),
        ("p.csv", "T0\n50\n", ["column T0", "'50' is out of range", "> 0 and <= 10"]),
        ("p.csv", "r1,c2\n1.0\n", ["p.csv line 2", "1 values for 2 columns"]),
        ("p.csv", "r1\n\x00\n", ["p.csv line 2"]),
    ],
)
def test_a_bad_cohort_file_is_one_line_naming_the_problem(tmp_path: Path, name: str, content: str, pieces):
    path = _csv(tmp_path, content, name)
    with pytest.raises(ValidationError) as caught:
        ChemoParams(cohort_file=str(path))
    message = caught.value.errors()[0]["msg"]
    assert "\n" not in message
    for piece in pieces:
        assert piece in message, message


def test_too_many_patients_and_missing_files_are_refused(tmp_path: Path):
    big = _csv(tmp_path, "r1\n" + "1.0\n" * (MAX_COHORT_ROWS + 1))
    with pytest.raises(ValueError, match=f"more than {MAX_COHORT_ROWS:,} patients"):
        load_cohort(big)
    with pytest.raises(ValueError, match="no such file"):
        load_cohort(tmp_path / "nowhere.csv")
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(ValueError, match="not a regular file"):
        load_cohort(tmp_path / "folder.csv")


def test_too_large_a_file_is_refused_before_it_is_read(tmp_path: Path, monkeypatch):
    from fieldrl.domains.chemo import cohort

    monkeypatch.setattr(cohort, "MAX_COHORT_BYTES", 10)
    with pytest.raises(ValueError, match="11 bytes; cohort files are limited to 10 bytes"):
        load_cohort(_csv(tmp_path, "r1\n1.0\n1.1\n"))


# ----------------------------------------------------------------------------- scenarios


def _scenario(scenario_data: dict, cohort: str, eval_count: int = 2) -> dict:
    data = copy.deepcopy(scenario_data)
    data["params"] = {"preset": "s2", "max_t": 40, "cohort_file": cohort}
    data["seeds"]["eval"] = {"start": 100, "count": eval_count}
    data["budgets"] = {"demo": {"train_steps": 256, "eval_seeds": 2}}
    return data


def test_the_cohort_path_is_relative_to_the_scenario_and_recorded_absolute(
    scenario_data, tmp_path: Path, monkeypatch
):
    folder = tmp_path / "study"
    folder.mkdir()
    _csv(folder, "r1\n1.0\n2.0\n")
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(_scenario(scenario_data, "patients.csv")))
    monkeypatch.chdir(tmp_path)  # not the scenario's folder
    scenario = load_scenario(path)
    assert scenario.params["cohort_file"] == str(folder / "patients.csv")
    assert scenario.params["cohort_sha256"] == load_cohort(folder / "patients.csv").sha256


def test_a_scenario_with_a_bad_cohort_is_one_line_with_exit_2(scenario_data, tmp_path: Path):
    cli = CliRunner()
    _csv(tmp_path, "r1,c2\n1.0,-3\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_scenario(scenario_data, "patients.csv")))
    short = tmp_path / "short.yaml"
    short.write_text(yaml.safe_dump(_scenario(scenario_data, "few.csv", eval_count=5)))
    _csv(tmp_path, "r1\n1.0\n1.1\n", "few.csv")
    expected = {
        bad: ["params.cohort_file", "patients.csv line 2, column c2", "'-3' is out of range"],
        short: ["params", "has 2 patients but the scenario has 5 held-out seeds"],
    }
    for file, pieces in expected.items():
        with pytest.raises(ScenarioError):
            load_scenario(file)
        result = cli.invoke(app, ["validate", str(file)])
        message = " ".join(result.output.split())
        assert result.exit_code == 2 and message.startswith("error:") and "Traceback" not in result.output
        for piece in pieces:
            assert piece in message, message


def test_a_run_evaluates_on_the_cohort_and_refuses_a_changed_file_later(scenario_data, tmp_path: Path):
    cohort = _csv(tmp_path, "r1,a2,N0\n1.5,0.3,0.9\n0.7,0.8,0.95\n1.2,0.1,0.9\n")
    data = _scenario(scenario_data, "patients.csv", eval_count=3)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    folder = api.create_run(path, tmp_path / "run", budget="demo")
    snapshot = yaml.safe_load((folder.path / "scenario.yaml").read_text())
    assert snapshot["params"]["cohort_file"] == str(cohort)  # absolute: readable from anywhere
    result = api.run(path, out=tmp_path / "run2", budget="demo", show_progress=False)
    results = result.results
    assert sorted(set(results["eval_seed"])) == [100, 101]  # the demo budget's first two seeds

    # the same scenario with the nominal patient everywhere gives other numbers for the same seeds
    nominal = _csv(tmp_path, "r1\n1.5\n1.5\n1.5\n", "nominal.csv")
    data["params"]["cohort_file"] = str(nominal)
    data["policies"]["learned"] = []  # the heuristic is enough to compare patients
    other = tmp_path / "nominal.yaml"
    other.write_text(yaml.safe_dump(data))
    baseline = api.run(other, out=tmp_path / "run3", budget="demo", show_progress=False).results

    def burden(frame: pd.DataFrame) -> pd.Series:
        rows = frame[(frame["policy"] == "constant 0.5") & (frame["metric"] == "tumour_burden")]
        return rows.set_index("eval_seed")["value"]

    assert burden(results)[100] == pytest.approx(burden(baseline)[100])  # row 0: nominal r1, a2, N0
    assert burden(results)[101] != pytest.approx(burden(baseline)[101])  # row 1 differs

    # re-reporting later works from the snapshot; a changed cohort file is refused, in one line
    pdf = PdfReader(api.report(result.run_dir))
    text = " ".join(" ".join((page.extract_text() or "").split()) for page in pdf.pages)
    assert "Held-out patients from your cohort file" in text and "patients.csv" in text
    cohort.write_text("r1,a2,N0\n1.0,0.3,0.9\n0.7,0.8,0.95\n1.2,0.1,0.9\n")
    with pytest.raises(FieldrlError, match="patients.csv: this run's input file .cohort_file. changed after"):
        api.evaluate(result.run_dir, show_progress=False)
