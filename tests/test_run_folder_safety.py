"""Run folders that cannot be turned against their user (issue 22, defects 2, 7 and 8): names never
lead out of the run folder, and files read back from a run are the ones fieldrl wrote."""

from __future__ import annotations

import copy
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import fieldrl
from fieldrl import api
from fieldrl.cli import app
from fieldrl.errors import FieldrlError
from fieldrl.evaluation import runner
from fieldrl.evaluation.store import RunFolder

cli = CliRunner()


def _write(tmp_path: Path, data: dict, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _one_line_exit_2(args: list[str], *pieces: str) -> str:
    result = cli.invoke(app, args)
    message = result.output.strip()
    assert result.exit_code == 2, message
    assert message.startswith("error:") and "Traceback" not in message, message
    flat = " ".join(message.split())
    for piece in pieces:
        assert piece in flat, flat
    return flat


# ----------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("where", "name", "field"),
    [
        ("heuristic", "..", "policies.heuristics[0].name"),
        ("learned", "..", "policies.learned[0].name"),
        ("learned", "../../victim", "policies.learned[0].name"),
        ("variant", "..", "variants (a key)"),
        ("variant", "a/b", "variants (a key)"),
        ("scenario", "../x", "name"),
        ("heuristic", ".hidden", "policies.heuristics[0].name"),
    ],
)
def test_names_that_are_not_safe_path_components_are_refused(scenario_data, tmp_path, where, name, field):
    if where == "heuristic":
        scenario_data["policies"]["heuristics"][0]["name"] = name
    elif where == "learned":
        scenario_data["policies"]["learned"][0]["name"] = name
    elif where == "variant":
        scenario_data["variants"] = {name: {}}
    else:
        scenario_data["name"] = name
    file = _write(tmp_path, scenario_data)
    _one_line_exit_2(["validate", str(file)], field, repr(name), "pattern")
    _one_line_exit_2(["run", str(file), "--out", str(tmp_path / "run"), "--quiet"], field)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("variants", "names"),
    [({"a b": {}, "a-b": {}}, None), (None, ("PPO (shared)", "ppo shared"))],
    ids=["variants", "policies"],
)
def test_two_names_that_would_share_a_folder_are_refused(scenario_data, tmp_path, variants, names):
    if variants:
        scenario_data["variants"] = variants
    else:
        scenario_data["policies"]["heuristics"][0]["name"] = names[0]
        scenario_data["policies"]["heuristics"][1]["name"] = names[1]
    _one_line_exit_2(["validate", str(_write(tmp_path, scenario_data))], "would share one folder")


def test_names_with_spaces_and_punctuation_stay_valid(scenario_data, tmp_path):
    scenario_data["policies"]["heuristics"][1]["name"] = "constant +0.5 (dose, per step)"
    scenario_data["variants"] = {"load-1.5": {}, "s 3": {}}
    assert cli.invoke(app, ["validate", str(_write(tmp_path, scenario_data))]).exit_code == 0


@pytest.mark.parametrize("name", ["..", ".", "../..", "/etc", "a/../../b", "", "--"])
def test_every_path_built_from_a_name_stays_in_the_run_folder(tmp_path, name):
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    job = runner.TrainJob(name, name, 0)
    rels = [runner.model_dir(name, name, 0), runner.checkpoint_dir(job)]
    rels += runner.partial_results(runner.EvalJob(name, name, runner.HEURISTIC_TRAIN_SEED))
    for rel in rels:
        target = folder.inside(rel).resolve()
        assert target.is_relative_to(folder.path.resolve()) and target != folder.path.resolve(), rel


def test_the_run_folder_refuses_to_write_or_read_outside_itself(tmp_path):
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    (tmp_path / "outside").mkdir()
    (folder.path / "link").symlink_to(tmp_path / "outside")
    for rel in ("../escaped.txt", "link/escaped.txt", str(tmp_path / "abs.txt")):
        with pytest.raises(FieldrlError, match="outside the run folder"):
            folder.write_bytes(rel, b"x", record=False)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["link", "outside", "run"]


# ----------------------------------------------------------------------------- files read back


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """One evaluated and reported heuristic-only run (seconds); tests work on copies of it."""
    from conftest import TINY_SCENARIO

    data = copy.deepcopy(TINY_SCENARIO)
    data["policies"]["learned"] = []
    data["seeds"]["eval"] = {"start": 100, "count": 3}
    base = tmp_path_factory.mktemp("finished")
    return fieldrl.run(_write(base, data), out=base / "run", show_progress=False).run_dir


@pytest.fixture
def run_copy(finished_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(finished_run, tmp_path / "run"))


def test_report_refuses_truncated_results(run_copy):
    path = run_copy / "results.parquet"
    path.write_bytes(path.read_bytes()[:100])
    _one_line_exit_2(["report", str(run_copy)], "results.parquet", "changed since fieldrl wrote it")


def test_report_refuses_results_edited_after_the_run(run_copy):
    path = run_copy / "results.parquet"
    frame = pd.read_parquet(path)
    frame.loc[frame["metric"] == "return", "value"] += 1000.0
    # bytes, not a path: once libsumo is loaded in a process, pyarrow cannot open a file system
    # ("scheme 'file' already registered"); fieldrl itself writes parquet through buffers
    path.write_bytes(frame.to_parquet(index=False))
    _one_line_exit_2(["report", str(run_copy)], "results.parquet", "SHA-256 differs from the manifest")


def test_compare_refuses_a_corrupted_summary(run_copy):
    (run_copy / "summary.json").write_text('{"variants": ')
    _one_line_exit_2(["compare", str(run_copy)], "summary.json", "changed since fieldrl wrote it")


def test_an_edited_scenario_snapshot_is_refused(run_copy):
    path = run_copy / "scenario.yaml"
    path.write_text(
        path.read_text()
        .replace("count: 3", "count: 4")
        .replace("episodes_per_seed: 1", "episodes_per_seed: 2")
    )
    _one_line_exit_2(["report", str(run_copy)], "scenario.yaml", "changed since fieldrl wrote it")


@pytest.mark.parametrize("manifest", ['{"files": [1, 2]}', "[]", '{"files": {"a": 5}}', "\x00\x01"])
def test_a_damaged_manifest_is_one_message(run_copy, manifest):
    (run_copy / "manifest.json").write_text(manifest)
    _one_line_exit_2(["report", str(run_copy)], "manifest.json", "unreadable")


def test_an_untampered_run_still_reports(run_copy):
    result = cli.invoke(app, ["report", str(run_copy)])
    assert result.exit_code == 0, result.output
    assert json.loads((run_copy / "manifest.json").read_text())["files"]["report.pdf"]


# ----------------------------------------------------------------------------- Ray addresses


@pytest.fixture
def not_ray() -> Iterator[int]:
    """A TCP port that accepts connections and never answers (as a firewall or another service might)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_an_address_that_answers_tcp_but_is_not_ray_fails_fast_and_writes_nothing(
    scenario_data, tmp_path, not_ray
):
    scenario_data["policies"]["learned"] = []
    file = _write(tmp_path, scenario_data)
    out = tmp_path / "run"
    cmd = [
        "run",
        str(file),
        "--out",
        str(out),
        "--quiet",
        "--backend",
        "ray",
        "--address",
        f"127.0.0.1:{not_ray}",
    ]
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "fieldrl.cli", *cmd], capture_output=True, text=True, timeout=120
    )
    assert time.monotonic() - start < 30
    flat = " ".join(done.stderr.split())
    assert done.returncode == 2 and "not as Ray does" in flat and "Traceback" not in flat, flat
    assert not out.exists()


@pytest.mark.parametrize("address", ["nonsense", "127.0.0.1:99999", "127.0.0.1:", ":6379", "ray://host"])
def test_a_malformed_ray_address_is_refused_before_a_run_folder_exists(scenario_data, tmp_path, address):
    file = _write(tmp_path, scenario_data)
    out = tmp_path / "run"
    args = ["run", str(file), "--out", str(out), "--quiet", "--backend", "ray", "--address", address]
    _one_line_exit_2(args, f"--address = {address!r}", "not a Ray address")
    assert not out.exists()


@pytest.mark.needs("ray")
def test_a_cluster_that_refuses_the_driver_leaves_no_run_folder(scenario_data, tmp_path, monkeypatch):
    from fieldrl.evaluation import backends

    def refuse(ray, jobs, address):
        raise backends.BackendUnavailable(
            "--address = 'x': cannot join a Ray cluster there (version mismatch)"
        )

    monkeypatch.setattr(backends, "_init_ray", refuse)
    scenario_data["policies"]["learned"] = []
    out = tmp_path / "run"
    with pytest.raises(FieldrlError, match="version mismatch"):
        fieldrl.run(
            _write(tmp_path, scenario_data), out=out, jobs=api.Backend(name="ray"), show_progress=False
        )
    assert not out.exists()
