"""Run folders keep their promises on the surfaces added since issue 22 (issue 39): the lock file is
never written through a link, run-folder reads never block on a FIFO, the user's own input files are
pinned by SHA-256, and a value a tuned file replaces is still checked and named on `run`."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import one_line_exit_2
from test_taxiway_layout import TINY
from typer.testing import CliRunner

import fieldrl
from fieldrl.cli import app
from fieldrl.scenario import builtin_scenarios, load_scenario

cli = CliRunner()
FIELDRL = [sys.executable, "-m", "fieldrl.cli"]


def _subprocess_exit_2(args: list[str], *pieces: str) -> str:
    """The CLI in a process of its own, which must answer within a minute (a FIFO must not block it)."""
    done = subprocess.run([*FIELDRL, *args], capture_output=True, text=True, timeout=120)
    message = done.stderr.strip()
    assert done.returncode == 2, (done.returncode, message, done.stdout)
    assert message.startswith("error:") and "Traceback" not in message, message
    flat = " ".join(message.split())
    for piece in pieces:
        assert piece in flat, flat
    return flat


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """One evaluated and reported heuristic-only chemo run (seconds); tests work on copies of it."""
    from conftest import TINY_SCENARIO

    data = copy.deepcopy(TINY_SCENARIO)
    data["policies"]["learned"] = []
    data["seeds"]["eval"] = {"start": 100, "count": 3}
    base = tmp_path_factory.mktemp("finished")
    (base / "s.yaml").write_text(yaml.safe_dump(data))
    return fieldrl.run(base / "s.yaml", out=base / "run", show_progress=False).run_dir


@pytest.fixture
def run_copy(finished_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(finished_run, tmp_path / "run", symlinks=True))


# ----------------------------------------------------------------------------- the lock file


@pytest.mark.parametrize(
    "command", [["report"], ["evaluate"], ["run", "--resume"]], ids=["report", "evaluate", "resume"]
)
def test_a_lock_file_linked_to_an_outside_file_leaves_that_file_alone(run_copy, tmp_path, command):
    victim = tmp_path / "important.txt"
    victim.write_text("precious\n")
    lock = run_copy / ".fieldrl.lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(victim)
    one_line_exit_2([*command, str(run_copy)], ".fieldrl.lock", "symbolic link")
    assert victim.read_text() == "precious\n"


def test_a_lock_file_linked_to_a_missing_path_creates_nothing(run_copy, tmp_path):
    target = tmp_path / "elsewhere" / "created.txt"
    target.parent.mkdir()
    lock = run_copy / ".fieldrl.lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(target)
    one_line_exit_2(["report", str(run_copy)], ".fieldrl.lock", "symbolic link")
    assert not target.exists()


def test_a_lock_file_that_is_a_fifo_or_a_link_to_dev_null_is_one_line(run_copy):
    lock = run_copy / ".fieldrl.lock"
    lock.unlink(missing_ok=True)
    os.mkfifo(lock)
    _subprocess_exit_2(["report", str(run_copy)], ".fieldrl.lock", "named pipe")
    lock.unlink()
    lock.symlink_to("/dev/null")
    one_line_exit_2(["report", str(run_copy)], ".fieldrl.lock", "symbolic link")


# ----------------------------------------------------------------------------- reads never block


@pytest.mark.parametrize(
    "command", [["report"], ["compare"], ["run", "--resume"]], ids=["report", "compare", "resume"]
)
def test_a_manifest_that_is_a_fifo_is_refused_at_once(run_copy, command):
    manifest = run_copy / "manifest.json"
    manifest.unlink()
    os.mkfifo(manifest)
    _subprocess_exit_2([*command, str(run_copy)], "manifest.json", "named pipe")


def test_a_results_file_replaced_by_a_fifo_is_refused_at_once(run_copy):
    results = run_copy / "summary.json"
    results.unlink()
    os.mkfifo(results)
    _subprocess_exit_2(["compare", str(run_copy)], "summary.json")


# ----------------------------------------------------------------------------- input files pinned


@pytest.fixture(scope="module")
def airport_run(tmp_path_factory) -> Path:
    """A heuristic-only taxiway run on the user's own layout file (seconds)."""
    study = tmp_path_factory.mktemp("airport")
    (study / "airport.yaml").write_text(yaml.safe_dump(TINY))
    scenario = {
        "name": "my-airport",
        "domain": "taxiway",
        "params": {"layout_file": "airport.yaml", "movements_per_hour": 30.0, "horizon_min": 10.0},
        "policies": {"heuristics": [{"use": "fcfs"}]},
        "seeds": {"train": [0], "eval": [100, 101]},
    }
    (study / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    return fieldrl.run(study / "scenario.yaml", out=study / "run", show_progress=False).run_dir


@pytest.fixture
def airport(airport_run: Path, tmp_path: Path):
    """A copy of the airport run and its layout, with the snapshot pointing at the copied layout."""
    layout = tmp_path / "airport.yaml"
    shutil.copy(airport_run.parent / "airport.yaml", layout)
    run = Path(shutil.copytree(airport_run, tmp_path / "run"))
    old = str(airport_run.parent / "airport.yaml")
    for name in ("scenario.yaml", "inputs.json"):  # a moved run, its manifest rewritten to match
        (run / name).write_text((run / name).read_text().replace(old, str(layout)))
    manifest = json.loads((run / "manifest.json").read_text())
    from fieldrl.files import sha256_of

    for name in ("scenario.yaml", "inputs.json"):
        manifest["files"][name]["sha256"] = sha256_of(run / name)
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run, layout


def test_the_run_folder_pins_the_users_layout_file(airport):
    run, layout = airport
    pins = json.loads((run / "inputs.json").read_text())["files"]
    assert list(pins) == [str(layout)] and pins[str(layout)]["field"] == "layout_file"
    assert "inputs.json" in json.loads((run / "manifest.json").read_text())["files"]
    result = cli.invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output  # untouched: reported as before


@pytest.mark.parametrize(
    "command",
    [["report"], ["evaluate"], ["run", "--resume"], ["compare"]],
    ids=["report", "evaluate", "resume", "compare"],
)
def test_a_layout_edited_after_the_run_is_refused_naming_it(airport, command):
    run, layout = airport
    moved = copy.deepcopy(TINY)
    moved["nodes"][4]["y"] = 900  # the stand moved: every taxi time changes
    layout.write_text(yaml.safe_dump(moved))
    (run / "report.pdf").unlink()  # so that --resume has something left to do
    one_line_exit_2([*command, str(run)], str(layout), "layout_file", "changed after the run started")


def test_a_layout_deleted_after_the_run_is_refused_naming_it(airport):
    run, layout = airport
    layout.unlink()
    one_line_exit_2(["evaluate", str(run)], str(layout), "layout_file", "missing")


def test_a_run_folder_whose_pins_were_dropped_cannot_vouch_for_its_files(airport):
    run, layout = airport
    (run / "inputs.json").write_text('{"files": {}}\n')
    manifest = json.loads((run / "manifest.json").read_text())
    from fieldrl.files import sha256_of

    manifest["files"]["inputs.json"]["sha256"] = sha256_of(run / "inputs.json")
    (run / "manifest.json").write_text(json.dumps(manifest))
    one_line_exit_2(["report", str(run)], str(layout), "not pinned")


def test_a_sumo_configuration_pins_every_file_it_lists(tmp_path):
    from fieldrl.domains import get_domain

    for name, root in (("net.net.xml", "net"), ("demand.rou.xml", "routes"), ("extra.add.xml", "additional")):
        (tmp_path / name).write_text(f"<{root}/>\n")
    config = tmp_path / "city.sumocfg"
    config.write_text(
        '<configuration><input><net-file value="net.net.xml"/><route-files value="demand.rou.xml"/>'
        '<additional-files value="extra.add.xml"/></input></configuration>\n'
    )
    files = get_domain("traffic").input_files({"sumocfg": str(config)})
    assert files == {
        "sumocfg": config,
        "sumocfg net-file[0]": tmp_path / "net.net.xml",
        "sumocfg route-files[0]": tmp_path / "demand.rou.xml",
        "sumocfg additional-files[0]": tmp_path / "extra.add.xml",
    }


# ----------------------------------------------------------------------------- tuned files

TUNED = """\
algorithm: ppo
policy: PPO
hyperparameters: {gamma: 0.95}
study: {study: tiny/default/PPO, trials: 3, best_trial: 1, best_value: 1.0}
"""


def _tuned_scenario(scenario_data, write_scenario, tmp_path, gamma: float) -> Path:
    (tmp_path / "tuned.yaml").write_text(TUNED)
    entry = scenario_data["policies"]["learned"][0]
    entry["hyperparameters"]["gamma"] = gamma
    entry["tuned"] = "tuned.yaml"
    return write_scenario(scenario_data)


def test_a_typo_a_tuned_file_replaces_is_still_refused(scenario_data, write_scenario, tmp_path):
    path = _tuned_scenario(scenario_data, write_scenario, tmp_path, gamma=7.5)
    one_line_exit_2(
        ["validate", str(path)], "policies.learned[0].hyperparameters.gamma", "7.5", "tuned.yaml replaces it"
    )
    one_line_exit_2(["run", str(path), "--out", str(tmp_path / "run"), "--quiet"], "gamma", "7.5")
    assert not (tmp_path / "run").exists()


def test_run_says_what_a_tuned_file_replaced(scenario_data, write_scenario, tmp_path):
    path = _tuned_scenario(scenario_data, write_scenario, tmp_path, gamma=0.9)
    result = cli.invoke(app, ["train", str(path), "--out", str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "note: PPO: tuned.yaml replaces what the scenario wrote: gamma = 0.9 -> 0.95" in flat, flat


def test_a_value_equal_to_the_tuned_one_is_not_called_replaced(scenario_data, write_scenario, tmp_path):
    path = _tuned_scenario(scenario_data, write_scenario, tmp_path, gamma=0.95)
    entry = load_scenario(path, build=False).policies.learned[0]
    assert entry.tuning is not None and entry.tuning.replaced == [] and entry.replaced_settings() == []


def test_n_envs_left_at_its_default_is_not_called_replaced(scenario_data, write_scenario, tmp_path):
    (tmp_path / "tuned.yaml").write_text(TUNED.replace("policy: PPO\n", "policy: PPO\nn_envs: 2\n"))
    entry = scenario_data["policies"]["learned"][0]
    del entry["n_envs"]
    entry["tuned"] = "tuned.yaml"
    loaded = load_scenario(write_scenario(scenario_data), build=False).policies.learned[0]
    assert loaded.n_envs == 2 and loaded.tuning is not None and loaded.tuning.replaced == []


@pytest.mark.parametrize("ref", builtin_scenarios())
def test_shipped_scenarios_write_nothing_their_tuned_files_replace(ref):
    for entry in load_scenario(ref, build=False).policies.learned:
        assert entry.tuning is None or not entry.tuning.replaced, (entry.label, entry.replaced_settings())


# ----------------------------------------------------------------------------- --trust


def test_evaluate_trust_finishes_with_weights_the_manifest_does_not_vouch_for(
    scenario_data, write_scenario, tmp_path
):
    """A weights file put there by hand (the same tensors, halved) is evaluated with --trust, and the
    summary's training record is read from that file, not refused against the manifest."""
    from fieldrl.policies.weights import policy_bytes, read_record, read_weights

    run_dir = fieldrl.train(write_scenario(scenario_data), out=tmp_path / "run", show_progress=False)
    path = run_dir / "models/default/PPO/seed-0/policy.safetensors"
    record = read_record(path)
    halved = {k: v / 2 if v.is_floating_point() else v for k, v in read_weights(path).items()}
    path.write_bytes(policy_bytes(halved, record))
    one_line_exit_2(
        ["evaluate", str(run_dir), "--quiet"], "policy.safetensors", "does not match the manifest"
    )
    trusted = cli.invoke(app, ["evaluate", str(run_dir), "--quiet", "--trust"])
    assert trusted.exit_code == 0, trusted.output
    assert cli.invoke(app, ["report", str(run_dir)]).exit_code == 0
