"""``fieldrl tune``: equal trials per learned entry, scored on validation seeds only, resumable."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.errors import ScenarioError
from fieldrl.evaluation import runner, study_store, tuning
from fieldrl.evaluation.runner import episode_seed
from fieldrl.scenario import load_scenario, scenario_text

cli = CliRunner()


def _tunable(data: dict) -> dict:
    data["seeds"]["validation"] = {"start": 50, "count": 3}
    data["policies"]["learned"].append(
        {
            "algorithm": "sac",
            "name": "SAC",
            "train_steps": 240,
            "n_envs": 1,
            "hyperparameters": {"learning_starts": 60, "batch_size": 32},
        }
    )
    data["policies"]["learned"][0]["train_steps"] = 512
    return data


def test_every_entry_gets_the_same_trials_scored_on_validation_seeds_only(
    scenario_data, write_scenario, tmp_path, monkeypatch
):
    seen: list[int] = []
    real = runner.run_episodes

    def spy(domain, params, policy, seeds, *args, **kwargs):
        seen.extend(int(s) for s in seeds)
        return real(domain, params, policy, seeds, *args, **kwargs)

    monkeypatch.setattr(runner, "run_episodes", spy)
    file = write_scenario(_tunable(scenario_data))
    result = tuning.tune(file, trials=3, out=tmp_path / "t", show_progress=False, keep=("net_arch",))
    assert set(result.studies) == {"PPO", "SAC"}
    assert all(study["trials"] == 3 for study in result.studies.values())
    validation = {episode_seed(s, 0) for s in (50, 51, 52)}
    assert seen and set(seen) <= validation  # never a held-out (100-105) or training seed
    tuned = yaml.safe_load((tmp_path / "t" / result.studies["SAC"]["file"]).read_text())
    assert tuned["algorithm"] == "sac" and tuned["study"]["trials"] == 3
    assert "net_arch" not in tuned["study"]["search_space"]  # kept at the scenario's value
    assert "gradient_steps" in tuned["study"]["search_space"]
    assert tuned["study"]["best_value"] == max(
        t["value"]
        for t in tuning.trials_frame(tmp_path / "t").to_dict("records")
        if t["study"].endswith("SAC")
    )
    # the scenario refers to the tuned file; its values and provenance come with it
    data = yaml.safe_load(file.read_text())
    data["policies"]["learned"][1]["tuned"] = str(tmp_path / "t" / result.studies["SAC"]["file"])
    scenario = load_scenario(write_scenario(data, "uses-tuned.yaml"))
    sac = scenario.policies.learned[1]
    assert sac.n_envs == tuned["n_envs"] and sac.tuned is None
    assert tuned["hyperparameters"].items() <= sac.hyperparameters.items()
    assert sac.tuning.trials == 3 and sac.tuning.best_value == pytest.approx(tuned["study"]["best_value"])


def test_a_study_first_runs_the_scenario_s_own_configuration(scenario_data, write_scenario, tmp_path):
    """Trial 0 is the hand-set configuration, exactly; a study never ends below it on validation."""
    data = _tunable(scenario_data)
    data["policies"]["learned"] = data["policies"]["learned"][1:]  # SAC only
    file = write_scenario(data)
    result = tuning.tune(file, trials=2, out=tmp_path / "t", show_progress=False)
    frame = tuning.trials_frame(tmp_path / "t").sort_values("number")
    first, second = frame.to_dict("records")
    assert first["handset"] and not second["handset"]
    assert json.loads(first["hyperparameters"]) == {"learning_starts": 60, "batch_size": 32}
    assert first["n_envs"] == 1
    params = json.loads(first["params"])  # what the sampler was told: the nearest point of the space
    assert params["batch_size"] == 32 and params["learning_starts"] == 500 and params["net_arch"] == "medium"
    study = result.studies["SAC"]
    assert study["handset_value"] == pytest.approx(first["value"])
    assert study["best_value"] == max(first["value"], second["value"])
    assert study["best_is_handset"] == (first["value"] >= second["value"])
    tuned = yaml.safe_load((tmp_path / "t" / study["file"]).read_text())
    if study["best_is_handset"]:
        assert tuned["hyperparameters"] == {"learning_starts": 60, "batch_size": 32} and tuned["n_envs"] == 1


def test_a_tuned_file_for_another_algorithm_or_missing_is_refused(scenario_data, write_scenario, tmp_path):
    tuned = {"algorithm": "sac", "hyperparameters": {}, "study": {"study": "x", "trials": 1}}
    (tmp_path / "sac.yaml").write_text(yaml.safe_dump(tuned))
    scenario_data["policies"]["learned"][0]["tuned"] = "sac.yaml"
    with pytest.raises(ScenarioError, match="tuned for algorithm sac, but this entry is ppo"):
        load_scenario(write_scenario(scenario_data))
    scenario_data["policies"]["learned"][0]["tuned"] = "nowhere.yaml"
    with pytest.raises(ScenarioError) as info:
        load_scenario(write_scenario(scenario_data))
    assert "policies.learned[0].tuned = 'nowhere.yaml'" in str(info.value) and "no such file" in str(
        info.value
    )


def test_tuning_without_validation_seeds_is_refused_with_one_line(scenario_data, write_scenario, tmp_path):
    out = tmp_path / "never"
    result = cli.invoke(app, ["tune", str(write_scenario(scenario_data)), "--trials", "2", "--out", str(out)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "seeds.validation is missing" in flat, flat
    assert "Traceback" not in flat and not out.exists()


def _finished_trials(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as con:
            return con.execute("select count(*) from trials where state = 'COMPLETE'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow
def test_a_study_killed_with_sigkill_resumes_and_finishes_its_trials(scenario_data, write_scenario, tmp_path):
    data = _tunable(scenario_data)
    data["policies"]["learned"] = data["policies"]["learned"][:1]
    data["policies"]["learned"][0]["train_steps"] = 4096
    file = write_scenario(data)
    out = tmp_path / "study"
    cmd = [
        sys.executable,
        "-m",
        "fieldrl.cli",
        "tune",
        str(file),
        "--trials",
        "4",
        "--out",
        str(out),
        "--quiet",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 240
    while (
        _finished_trials(out / study_store.DB_FILE) < 1
        and time.monotonic() < deadline
        and proc.poll() is None
    ):
        time.sleep(0.2)
    assert proc.poll() is None, "the study ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    resumed = cli.invoke(app, ["tune", "--resume", str(out), "--quiet"])
    assert resumed.exit_code == 0, resumed.output
    frame = tuning.trials_frame(out)
    finished = frame[frame["state"].isin(["COMPLETE", "PRUNED"])]
    assert len(finished) == 4
    killed = frame[frame["interrupted"]]
    assert len(killed) <= 1
    for _, row in killed.iterrows():  # the interrupted configuration was tried again
        # (a kill during the ask itself leaves some parameters unsampled; those are sampled anew)
        partial = json.loads(row["params"]).items()
        assert any(partial <= json.loads(done).items() for done in finished["params"])
    settings = json.loads((out / tuning.SETTINGS_FILE).read_text())
    assert settings["trials"] == 4


def test_a_resumed_study_draws_configurations_it_has_not_scored(scenario_data, write_scenario, tmp_path):
    """Resumed samplers seeded as before would propose again what they drew before the stop (TPE's
    start-up trials are random draws), and the study would score one configuration twice."""
    data = _tunable(scenario_data)
    data["policies"]["learned"] = data["policies"]["learned"][1:]  # SAC: its hand-set trial fixes every draw
    out = tmp_path / "study"
    file = write_scenario(data)
    first = cli.invoke(app, ["tune", str(file), "--trials", "2", "--out", str(out), "--quiet"])
    assert first.exit_code == 0, first.output
    settings = json.loads((out / tuning.SETTINGS_FILE).read_text())
    (out / tuning.SETTINGS_FILE).write_text(json.dumps({**settings, "trials": 4}))  # stopped after 2 of 4
    resumed = cli.invoke(app, ["tune", "--resume", str(out), "--quiet"])
    assert resumed.exit_code == 0, resumed.output
    frame = tuning.trials_frame(out)
    finished = frame[frame["state"].isin(["COMPLETE", "PRUNED"])]
    assert len(finished) == 4
    assert finished["params"].nunique() == 4, finished["params"].tolist()


def test_validate_says_which_written_settings_a_tuned_file_replaces(write_scenario):
    """A tuned file wins over the hyperparameters the scenario wrote; validate says so, by name."""
    from importlib import resources

    data = yaml.safe_load(scenario_text("chemo/quick")[1])
    for entry in data["policies"]["learned"]:  # found from the test's own scenario file
        entry["tuned"] = str(resources.files("fieldrl") / "scenarios" / "chemo" / entry["tuned"])
    written = next(e for e in data["policies"]["learned"] if e["name"] == "PPO")
    written.update(n_envs=16, hyperparameters={"n_steps": 256, "gamma": 0.99, "gae_lambda": 0.991746})
    ppo = next(
        e for e in load_scenario(write_scenario(data), build=False).policies.learned if e.label == "PPO"
    )
    assert ppo.tuning is not None and set(ppo.tuning.replaced) == {
        "n_steps",
        "gamma",
        "n_envs",
    }  # not equal ones
    assert ppo.hyperparameters["n_steps"] == 512 and ppo.n_envs == 32
    result = CliRunner().invoke(app, ["validate", str(write_scenario(data))])
    flat = " ".join(result.output.split())
    assert result.exit_code == 0
    assert "PPO: hyperparameters from" in flat and "replaces the scenario's gamma, n_envs, n_steps" in flat, (
        flat
    )


def test_workers_take_trials_one_at_a_time(tmp_path):
    """Two workers popping the hand-set (or a re-queued) trial at once could both take it on SQLite:
    taking a trial happens under an exclusive lock that a second holder cannot get meanwhile."""
    import fcntl

    lock = tmp_path / tuning.ASK_LOCK_FILE
    with tuning._one_asker(tmp_path), open(lock, "rb") as other, pytest.raises(BlockingIOError):
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(lock, "rb") as other:  # released on leaving
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_a_worker_that_finds_the_budget_taken_asks_for_no_trial(scenario_data, write_scenario, tmp_path):
    """With --jobs N the last trials are running in other workers when a worker looks for more: it
    stops without asking, so the study holds no surplus (failed) trial beside its budget."""
    import optuna

    data = _tunable(scenario_data)
    data["policies"]["learned"] = data["policies"]["learned"][1:]  # SAC only: the cheap one
    out = tmp_path / "study"
    file = write_scenario(data)
    first = cli.invoke(app, ["tune", str(file), "--trials", "2", "--out", str(out), "--quiet"])
    assert first.exit_code == 0, first.output
    settings = {**json.loads((out / tuning.SETTINGS_FILE).read_text()), "trials": 3}
    scenario = yaml.safe_load((out / tuning.SCENARIO_FILE).read_text())
    storage = f"sqlite:///{out / study_store.DB_FILE}"
    name = optuna.get_all_study_names(storage)[0]
    optuna.load_study(study_name=name, storage=storage).ask()  # trial 3 of 3, running in "another worker"
    ran = tuning.study_worker(scenario, settings["variant"], str(out), "SAC", settings, 1, None)
    assert ran == 0
    states = [t.state.name for t in optuna.load_study(study_name=name, storage=storage).trials]
    assert sorted(states) == ["COMPLETE", "COMPLETE", "RUNNING"]
