"""Runs that survive faults: interrupted evaluation, full disks, untrusted model files, and the Ray
backend giving the same results as the local pool (kill -9 and resume: test_resume_equality.py)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import fieldrl
from fieldrl import api
from fieldrl.cli import app
from fieldrl.evaluation import runner as job_runner

cli = CliRunner()


def _write(tmp_path: Path, data: dict, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_interrupted_evaluation_resumes_without_redoing_finished_jobs(scenario_data, tmp_path, monkeypatch):
    scenario_data["policies"]["learned"] = []
    scenario = _write(tmp_path, scenario_data)
    folder = api.create_run(scenario, tmp_path / "run")
    calls: list[str] = []
    real = job_runner.run_eval_job

    def failing_second(data, run_dir, job, hashes, trust, events):
        calls.append(job.policy)
        if job.policy == "constant 0.5" and calls.count("constant 0.5") == 1:
            raise KeyboardInterrupt
        return real(data, run_dir, job, hashes, trust, events)

    monkeypatch.setattr(job_runner, "run_eval_job", failing_second)
    with pytest.raises(KeyboardInterrupt):
        api.evaluate(folder.path, show_progress=False)
    assert not (folder.path / "results.parquet").exists()
    assert any(rel.startswith("partial/") for rel in folder.hashes())

    result = api.resume(folder.path, show_progress=False)
    assert calls == ["no treatment", "constant 0.5", "constant 0.5"]  # the finished job was kept
    assert set(result.results["policy"]) == {"no treatment", "constant 0.5"}
    assert not any(rel.startswith("partial/") for rel in folder.hashes())
    assert not (folder.path / "partial").exists()


def test_full_disk_while_writing_results_keeps_the_previous_results(scenario_data, tmp_path, monkeypatch):
    scenario_data["policies"]["learned"] = []
    run_dir = fieldrl.run(_write(tmp_path, scenario_data), out=tmp_path / "run", show_progress=False).run_dir
    before = (run_dir / "results.parquet").read_bytes()
    manifest = (run_dir / "manifest.json").read_bytes()

    from fieldrl import files

    real_replace = os.replace

    def full_disk(src, dst):
        if str(dst).endswith("results.parquet"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", full_disk)
    result = cli.invoke(app, ["evaluate", str(run_dir), "--quiet"])
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert "results.parquet: cannot write (No space left on device)" in message
    assert "Traceback" not in result.output
    assert (run_dir / "results.parquet").read_bytes() == before
    # the manifest holds what it held, and the mark of the evaluation that began (resume finishes it)
    files_now = json.loads((run_dir / "manifest.json").read_text())["files"]
    started = files_now.pop("partial/evaluation-started.json")
    assert files_now == json.loads(manifest)["files"] and started["bytes"] > 0
    assert not list(run_dir.glob(".results.parquet.*"))


def test_model_missing_from_manifest_needs_trust(scenario_data, tmp_path):
    run_dir = fieldrl.train(_write(tmp_path, scenario_data), out=tmp_path / "t", show_progress=False)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    del manifest["files"]["models/default/PPO/seed-0/policy.safetensors"]
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    refused = cli.invoke(app, ["evaluate", str(run_dir), "--quiet"])
    assert refused.exit_code == 2
    assert "--trust" in " ".join(refused.output.split())
    assert not (run_dir / "results.parquet").exists()
    trusted = cli.invoke(app, ["evaluate", str(run_dir), "--quiet", "--trust"])
    assert trusted.exit_code == 0, trusted.output
    assert "warning: --trust" in " ".join(trusted.output.split())  # said out loud
    assert "PPO" in set(pd.read_parquet(run_dir / "results.parquet")["policy"])


def test_cli_backend_arguments_are_checked(tmp_path):
    result = cli.invoke(app, ["run", "chemo/quick", "--address", "10.0.0.1:6379"])
    assert result.exit_code == 2 and "--address" in result.output and "--backend ray" in result.output
    result = cli.invoke(app, ["run", "chemo/quick", "--backend", "spark"])
    assert result.exit_code == 2
    result = cli.invoke(app, ["run"])
    assert result.exit_code == 2 and "SCENARIO is missing" in result.output


@pytest.fixture
def ray_alone(tmp_path_factory):
    """One Ray test at a time across the xdist workers: one test's `ray stop --force` would stop the
    cluster the other is running on."""
    import fcntl

    lock = tmp_path_factory.getbasetemp().parent / "ray-tests.lock"  # shared by every worker
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def test_ray_backend_gives_the_local_results(scenario_data, tmp_path, ray_alone):
    scenario = _write(tmp_path, scenario_data)
    local = fieldrl.run(scenario, out=tmp_path / "local", show_progress=False)
    on_ray = fieldrl.run(
        scenario, out=tmp_path / "ray", jobs=api.Backend(jobs=2, name="ray"), show_progress=False
    )
    pd.testing.assert_frame_equal(local.results, on_ray.results)
    assert on_ray.report.is_file()


def test_a_crashing_simulator_fails_only_its_episode(scenario_data, tmp_path, monkeypatch):
    """One held-out patient whose simulator raises: that episode is recorded as failed with the
    reason, the others in its batch are re-run on fresh simulators, and the report says so."""
    from fieldrl.domains.chemo import env as chemo_env
    from fieldrl.domains.chemo.env import ChemoEvalEnvs

    class Crashing(ChemoEvalEnvs):
        def step(self, actions):
            self.steps = getattr(self, "steps", 0) + 1
            if 102 in self.seeds and self.steps >= 5:
                raise RuntimeError("simulator died (segfault in the solver)")
            return super().step(actions)

    monkeypatch.setattr(chemo_env, "ChemoEvalEnvs", Crashing)
    scenario_data["policies"]["learned"] = []
    result = fieldrl.run(_write(tmp_path, scenario_data), out=tmp_path / "run", show_progress=False)
    failed = result.summary.failures_in("default")
    assert failed == result.summary.failed_episodes
    assert {(f.policy, f.eval_seed) for f in failed} == {("no treatment", 102), ("constant 0.5", 102)}
    assert all("RuntimeError: simulator died" in f.reason for f in failed)
    seeds = set(result.results["eval_seed"])
    assert 102 not in seeds and seeds == {100, 101, 103, 104, 105}
    mean = result.summary.variant("default").stat("no treatment", "return")
    assert mean is not None and mean.has_range
    assert all(v == v for v in (mean.value, mean.low, mean.high))  # no NaN: the failed seed is left out
    from test_pipeline import pdf_text

    assert "Failed episodes" in pdf_text(result.report)


def test_joining_a_ray_cluster_by_address(scenario_data, tmp_path, ray_alone, monkeypatch):
    """The multi-machine recipe, on one machine: `ray start --head`, then `--address`.

    In a home of its own that a local Ray run has already left ``~/.ray/auth_token`` in: the head
    then asks for that token, and the join must send it (it once did not: Ray reads its
    authentication mode once per process). The session leaves ``RAY_AUTH_MODE`` as it found it.
    """
    import secrets
    import shutil
    import socket

    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(secrets.token_hex(32))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)

    ray_cli = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    head = [ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false"]
    subprocess.run(head, check=True, capture_output=True, env=env, timeout=120)
    try:
        scenario_data["policies"]["learned"] = []
        scenario = _write(tmp_path, scenario_data)
        result = cli.invoke(
            app,
            [
                "run",
                str(scenario),
                "--out",
                str(tmp_path / "r"),
                "--quiet",
                "--backend",
                "ray",
                "--address",
                f"127.0.0.1:{port}",
            ],
        )
        assert result.exit_code == 0, result.output
        assert "RAY_AUTH_MODE" not in os.environ
        local = fieldrl.run(scenario, out=tmp_path / "local", show_progress=False).results
        pd.testing.assert_frame_equal(local, pd.read_parquet(tmp_path / "r/results.parquet"))
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, env=env, timeout=120)
    refused = cli.invoke(
        app,
        [
            "run",
            str(scenario),
            "--out",
            str(tmp_path / "x"),
            "--backend",
            "ray",
            "--address",
            f"127.0.0.1:{port}",
        ],
    )
    assert refused.exit_code == 2 and "cannot join a Ray cluster" in refused.output
    assert not (tmp_path / "x").exists()
