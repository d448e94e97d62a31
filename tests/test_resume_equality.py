"""Resume is the same run: a run interrupted in training (kill -9, one or two workers), in
evaluation or in the report, then finished with ``--resume``, ends with the results of the run
that was never interrupted -- every value, not only the same rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from fieldrl import api
from fieldrl.cli import app
from fieldrl.evaluation import runner as job_runner
from fieldrl.policies import checkpoint

cli = CliRunner()


def _scenario(base: dict) -> dict:
    """Two learned entries (on- and off-policy, with validation selection), checkpointing often."""
    data = dict(base)
    data.pop("budgets", None)
    data["seeds"] = {
        "train": [0],
        "eval": {"start": 100, "count": 4},
        "validation": {"start": 50, "count": 2},
    }
    data["policies"] = dict(base["policies"])
    data["policies"]["learned"] = [
        {
            "algorithm": "ppo",
            "name": "PPO",
            "train_steps": 6144,
            "n_envs": 4,
            "checkpoint_every": 1024,
            "validate_every": 2048,
            "normalize_obs": True,
            "hyperparameters": {"n_steps": 64, "batch_size": 64, "n_epochs": 2},
        },
        {
            "algorithm": "sac",
            "name": "SAC",
            "train_steps": 1600,
            "n_envs": 2,
            "checkpoint_every": 400,
            "validate_every": 800,
            "hyperparameters": {
                "learning_starts": 300,
                "batch_size": 32,
                "policy_kwargs": {"net_arch": [16, 16]},
            },
        },
    ]
    return data


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory) -> Path:
    from conftest import TINY_SCENARIO

    path = tmp_path_factory.mktemp("scenario") / "resume.yaml"
    path.write_text(yaml.safe_dump(_scenario(TINY_SCENARIO), sort_keys=False))
    return path


@pytest.fixture(scope="module")
def uninterrupted(scenario_file, tmp_path_factory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("clean") / "run"
    return api.run(scenario_file, out, show_progress=False).results


def _same(resumed_dir: Path, clean: pd.DataFrame) -> None:
    resumed = pd.read_parquet(resumed_dir / "results.parquet")
    pd.testing.assert_frame_equal(resumed, clean, check_exact=True)


def _kill_in_training(scenario_file: Path, out: Path, jobs: int) -> None:
    """Start ``fieldrl run`` and kill -9 its whole process group once a checkpoint exists."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fieldrl.cli", "run", str(scenario_file), "--out", str(out)]
        + ["--jobs", str(jobs), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    ckpt = out / "checkpoints/default/PPO/seed-0" / checkpoint.META
    deadline = time.monotonic() + 180
    try:
        while not ckpt.exists():
            assert proc.poll() is None, "the run ended before it could be interrupted"
            assert time.monotonic() < deadline, f"{ckpt} never appeared"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (out / "results.parquet").exists()
    assert 0 < json.loads(ckpt.read_text())["timesteps"] < 6144  # killed mid-training


@pytest.mark.parametrize("jobs", [1, 2])
def test_kill_9_in_training_then_resume_gives_the_uninterrupted_results(
    scenario_file, uninterrupted, tmp_path, jobs
):
    out = tmp_path / "run"
    _kill_in_training(scenario_file, out, jobs)
    saved_at = json.loads((out / "checkpoints/default/PPO/seed-0" / checkpoint.META).read_text())["timesteps"]
    result = cli.invoke(app, ["run", "--resume", str(out), "--jobs", str(jobs), "--quiet"])
    assert result.exit_code == 0, result.output
    _same(out, uninterrupted)
    assert not (
        out / "checkpoints"
    ).exists()  # each removed once its model is recorded, then the empty folders
    curve = pd.read_csv(out / "models/default/PPO/seed-0/learning_curve.csv")
    assert curve["timesteps"].min() <= saved_at < curve["timesteps"].max()  # one curve across the kill
    again = cli.invoke(app, ["run", "--resume", str(out)])
    assert again.exit_code == 2 and "complete" in again.output


def test_resume_from_each_checkpoint_continues_bit_for_bit(
    scenario_file, uninterrupted, tmp_path, monkeypatch
):
    """An interrupt right after the second checkpoint of each training (in process, no timing luck)."""
    saves: dict[Path, int] = {}
    real_save = checkpoint.save_checkpoint

    def interrupt_after_second(folder, *args, **kwargs):
        real_save(folder, *args, **kwargs)
        saves[folder] = saves.get(folder, 0) + 1
        if saves[folder] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint, "save_checkpoint", interrupt_after_second)
    folder = api.create_run(scenario_file, tmp_path / "run")
    for _ in range(2):  # PPO is interrupted, then SAC
        with pytest.raises(KeyboardInterrupt):
            api.resume(folder.path, show_progress=False)
    monkeypatch.setattr(checkpoint, "save_checkpoint", real_save)
    api.resume(folder.path, show_progress=False)
    assert len(saves) == 2 and min(saves.values()) >= 2  # both trainings were cut and resumed
    _same(folder.path, uninterrupted)


def test_interrupt_in_evaluation_then_resume_gives_the_uninterrupted_results(
    scenario_file, uninterrupted, tmp_path, monkeypatch
):
    calls: list[str] = []
    real = job_runner.run_eval_job

    def interrupted_once(data, run_dir, job, hashes, trust, events):
        calls.append(job.policy)
        if job.policy == "SAC" and calls.count("SAC") == 1:
            raise KeyboardInterrupt
        return real(data, run_dir, job, hashes, trust, events)

    monkeypatch.setattr(job_runner, "run_eval_job", interrupted_once)
    folder = api.create_run(scenario_file, tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        api.resume(folder.path, show_progress=False)
    assert (folder.path / "models").exists() and not (folder.path / "results.parquet").exists()
    api.resume(folder.path, show_progress=False)
    _same(folder.path, uninterrupted)


def test_interrupt_in_the_report_then_resume_gives_the_uninterrupted_results(
    scenario_file, uninterrupted, tmp_path, monkeypatch
):
    from fieldrl.reports import pdf

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pdf, "build_report", interrupted)
    folder = api.create_run(scenario_file, tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        api.resume(folder.path, show_progress=False)
    assert (folder.path / "results.parquet").exists() and not (folder.path / "report.pdf").exists()
    monkeypatch.undo()
    from fieldrl.evaluation import runner

    played: list[str] = []
    real = runner.run_eval_job

    def counted(data, run_dir, job, *args):
        played.append(job.policy)
        return real(data, run_dir, job, *args)

    monkeypatch.setattr(runner, "run_eval_job", counted)
    result = cli.invoke(app, ["run", "--resume", str(folder.path), "--quiet"])
    assert result.exit_code == 0, result.output
    assert (folder.path / "report.pdf").exists()
    assert played == []  # the evaluation had finished: resuming does not play it again
    _same(folder.path, uninterrupted)


def test_without_checkpoints_an_interrupted_training_restarts_and_gives_the_same_results(
    scenario_file, tmp_path, monkeypatch
):
    """The default (no checkpoint_every): nothing cuts the training envs' episodes, and a training
    interrupted in the middle starts again from its beginning on resume."""
    from fieldrl.policies import learned

    data = yaml.safe_load(scenario_file.read_text())
    for entry in data["policies"]["learned"]:
        entry.pop("checkpoint_every")
    data["policies"]["learned"] = data["policies"]["learned"][:1]  # PPO
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    clean = api.run(path, tmp_path / "clean", show_progress=False).results

    calls = {"n": 0}
    real = learned.LearningCurve._on_step

    def interrupted_once(self):
        calls["n"] += 1
        if calls["n"] == 500:  # in the middle of the training
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(learned.LearningCurve, "_on_step", interrupted_once)
    folder = api.create_run(path, tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        api.resume(folder.path, show_progress=False)
    assert not (folder.path / "checkpoints").exists()
    api.resume(folder.path, show_progress=False)
    _same(folder.path, clean)
