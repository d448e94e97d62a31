"""Tuning folders that cannot be turned against their user (issue 39): ``fieldrl tune`` and
``fieldrl tune --resume`` write only regular files of the folder, one process at a time, read back
only what they wrote, and end every problem with its folder's files as one line and exit status 2."""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import sqlalchemy
import yaml
from conftest import TINY_SCENARIO, one_line_exit_2
from optuna.distributions import CategoricalDistribution
from typer.testing import CliRunner

import fieldrl.files
from fieldrl.cli import app
from fieldrl.errors import FieldrlError
from fieldrl.evaluation import study_store, tuning
from fieldrl.policies.search_spaces import search_space, to_hyperparameters

cli = CliRunner()
STUDY = "tiny/default/PPO"


def _tunable(data: dict) -> dict:
    """The tiny chemo scenario with validation seeds and a PPO entry that trains in about a second."""
    data["seeds"]["validation"] = {"start": 5000, "count": 2}
    data["policies"]["learned"][0]["train_steps"] = 128
    data["policies"]["learned"][0]["hyperparameters"] = {"n_steps": 32, "batch_size": 64, "n_epochs": 2}
    return data


def _with_sac(data: dict) -> dict:
    data["policies"]["learned"].append(
        {
            "algorithm": "sac",
            "name": "SAC",
            "train_steps": 120,
            "n_envs": 1,
            "hyperparameters": {"learning_starts": 60, "batch_size": 32},
        }
    )
    return data


def _state(folder: Path) -> dict[str, str]:
    """Every file of the folder (links and FIFOs by what they are) with a digest of its content."""
    state = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            state[rel] = f"link to {os.readlink(path)}"
        elif path.is_fifo():
            state[rel] = "fifo"
        elif path.is_file():
            state[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def _set_trials(folder: Path, trials: int) -> None:
    settings = json.loads((folder / tuning.SETTINGS_FILE).read_text())
    (folder / tuning.SETTINGS_FILE).write_text(json.dumps({**settings, "trials": trials}))


def _edit_db(folder: Path, sql: str) -> None:
    """What a user with ``sqlite3 study.db`` can do."""
    with sqlite3.connect(folder / study_store.DB_FILE) as con:
        con.execute(sql)


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory) -> Path:
    """A finished tuning folder of one PPO entry and one trial (the hand-set one), to copy."""
    root = tmp_path_factory.mktemp("finished")
    file = root / "s.yaml"
    file.write_text(yaml.safe_dump(_tunable(copy.deepcopy(TINY_SCENARIO)), sort_keys=False))
    tuning.tune(file, trials=1, out=root / "t", show_progress=False)
    return root / "t"


@pytest.fixture
def folder(finished_study, tmp_path) -> Path:
    return Path(shutil.copytree(finished_study, tmp_path / "t"))


def _resume_refused(folder: Path, *pieces: str) -> str:
    """``tune --resume`` ends in one line and leaves every file of the folder as it was."""
    before = _state(folder)
    message = one_line_exit_2(["tune", "--resume", str(folder), "--quiet"], *pieces)
    assert _state(folder) == before
    return message


# ----------------------------------------------------------------------------- 1. links in the folder


def test_a_study_db_that_is_a_link_is_refused_and_its_target_untouched(folder, tmp_path):
    target = tmp_path / "elsewhere.db"
    (folder / study_store.DB_FILE).rename(target)
    (folder / study_store.DB_FILE).symlink_to(target)
    _set_trials(folder, 2)  # a study with a trial to run: it would write into the link's target
    before = target.read_bytes()
    _resume_refused(folder, str(folder / study_store.DB_FILE), "symbolic link")
    assert target.read_bytes() == before


@pytest.mark.parametrize("suffix", ["-journal", "-wal"])
def test_a_sqlite_side_file_that_is_a_link_is_refused(folder, tmp_path, suffix):
    target = tmp_path / "victim"
    (folder / (study_store.DB_FILE + suffix)).symlink_to(target)
    _resume_refused(folder, study_store.DB_FILE + suffix, "symbolic link")
    assert not target.exists()


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_an_ask_lock_that_is_a_link_or_fifo_is_refused_before_any_trial(folder, tmp_path, kind):
    target = tmp_path / "planted"
    lock = folder / tuning.ASK_LOCK_FILE
    lock.unlink()
    if kind == "link":
        lock.symlink_to(target)
    else:
        os.mkfifo(lock)
    _set_trials(folder, 2)
    _resume_refused(folder, tuning.ASK_LOCK_FILE, "symbolic link" if kind == "link" else "named pipe")
    assert not target.exists()


def test_a_worker_never_locks_through_a_link(tmp_path):
    (tmp_path / tuning.ASK_LOCK_FILE).symlink_to(tmp_path / "planted")
    with pytest.raises(FieldrlError, match="symbolic link"), tuning._one_asker(tmp_path):
        pass
    assert not (tmp_path / "planted").exists()


# ----------------------------------------------------------------------------- 2. one writer


HOLDER = """
import sys, time
from pathlib import Path
from fieldrl.files import folder_lock

with folder_lock(Path(sys.argv[1]), ".fieldrl.lock", "tuning folder"):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_second_tune_process_on_a_tuning_folder_is_refused(folder):
    _set_trials(folder, 2)  # work to do: a second writer would mark the first's trial failed
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        _resume_refused(folder, f"another fieldrl process (pid {holder.pid})", "tuning folder")
    finally:
        holder.kill()
        holder.wait()
    resumed = cli.invoke(app, ["tune", "--resume", str(folder), "--quiet"])  # free again: it finishes
    assert resumed.exit_code == 0, resumed.output


TRY_LOCK = """
import sys
from pathlib import Path
from fieldrl.errors import FieldrlError
from fieldrl.files import folder_lock

try:
    with folder_lock(Path(sys.argv[1]), ".fieldrl.lock", "tuning folder"):
        sys.exit(0)
except FieldrlError:
    sys.exit(3)
"""


def test_tune_holds_its_folder_while_its_trials_run(tmp_path, monkeypatch):
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(_tunable(copy.deepcopy(TINY_SCENARIO))))
    out = tmp_path / "t"
    codes: list[int] = []
    real = tuning.run_trial

    def trial_seen_from_another_process(*args, **kwargs):
        codes.append(subprocess.run([sys.executable, "-c", TRY_LOCK, str(out)]).returncode)
        return real(*args, **kwargs)

    monkeypatch.setattr(tuning, "run_trial", trial_seen_from_another_process)
    tuning.tune(file, trials=1, out=out, show_progress=False)
    assert codes == [3]


# ----------------------------------------------------------------------------- 3. tuning.json, scenario.yaml


@pytest.mark.parametrize(
    ("edit", "pieces"),
    [
        ({"variant": "zzz"}, ["tuning.json: variant = 'zzz'", "allowed: default"]),
        ({"trials": "abc"}, ["tuning.json: trials = 'abc'", "integer"]),
        ({"trials": 0}, ["tuning.json: trials = 0", "greater than or equal to 1"]),
        ({"policies": ["nope"]}, ["tuning.json: policies = 'nope'", "allowed: PPO"]),
        ({"keep": ["bogus"]}, ["tuning.json: keep = 'bogus'", "allowed:"]),
        ({"keep": "gamma"}, ["tuning.json: keep = 'gamma'", "valid list"]),
        ({"train_steps": -5}, ["tuning.json: train_steps = -5"]),
        ({"policies": None}, ["tuning.json: policies", "required field is missing"]),
        ({"seed": None}, ["tuning.json: seed", "required field is missing"]),
    ],
    ids=[
        "variant",
        "trials-text",
        "trials-0",
        "policy",
        "keep",
        "keep-not-list",
        "steps",
        "no-policies",
        "no-seed",
    ],
)
def test_an_edited_tuning_json_is_refused_naming_the_field(folder, edit, pieces):
    settings = json.loads((folder / tuning.SETTINGS_FILE).read_text())
    for key, value in edit.items():
        if value is None:
            del settings[key]
        else:
            settings[key] = value
    (folder / tuning.SETTINGS_FILE).write_text(json.dumps(settings))
    _resume_refused(folder, *pieces)


@pytest.mark.parametrize(
    ("name", "content", "piece"),
    [
        (tuning.SETTINGS_FILE, "{not json", "not valid JSON"),
        (tuning.SETTINGS_FILE, b"\xff\xfe\x00", "not readable as text"),
        (tuning.SETTINGS_FILE, "[1, 2]", "valid dictionary"),
        (tuning.SETTINGS_FILE, None, "named pipe"),
        (tuning.SCENARIO_FILE, "name: [unclosed", "scenario.yaml"),
        (tuning.SCENARIO_FILE, None, "named pipe"),
    ],
    ids=["json-syntax", "json-bytes", "json-list", "json-fifo", "scenario-syntax", "scenario-fifo"],
)
def test_a_corrupt_or_fifo_settings_or_scenario_file_is_one_line(folder, name, content, piece):
    path = folder / name
    path.unlink()
    if content is None:
        os.mkfifo(path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    _resume_refused(folder, name, piece)


# ----------------------------------------------------------------------------- 4. lost studies


def test_tune_creates_every_study_before_its_first_trial(tmp_path, monkeypatch):
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(_with_sac(_tunable(copy.deepcopy(TINY_SCENARIO)))))

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tuning, "run_trial", killed)
    with pytest.raises(KeyboardInterrupt):
        tuning.tune(file, trials=2, out=tmp_path / "t", show_progress=False)
    names = optuna.get_all_study_names(study_store.storage_url(tmp_path / "t"))
    assert sorted(names) == ["tiny/default/PPO", "tiny/default/SAC"]


def test_resume_refuses_a_study_db_that_lost_its_study(folder):
    optuna.delete_study(study_name=STUDY, storage=study_store.storage_url(folder))
    _resume_refused(folder, f"does not hold study {STUDY!r}", "start a new tuning folder")


@pytest.mark.parametrize("how", ["empty", "missing"])
def test_resume_refuses_an_empty_or_missing_study_db(folder, how):
    if how == "empty":
        (folder / study_store.DB_FILE).write_bytes(b"")
    else:
        (folder / study_store.DB_FILE).unlink()
    _resume_refused(folder, str(folder / study_store.DB_FILE), how, "start a new tuning folder")


# ----------------------------------------------------------------------------- 5. a corrupt study.db


@pytest.mark.parametrize("how", ["garbage", "truncated", "fifo"])
def test_a_corrupt_truncated_or_fifo_study_db_is_one_line(folder, how):
    db = folder / study_store.DB_FILE
    if how == "garbage":
        db.write_bytes(os.urandom(20_000))
    elif how == "truncated":
        db.write_bytes(db.read_bytes()[:8192])
    else:
        db.unlink()
        os.mkfifo(db)
    _resume_refused(folder, str(db))
    with pytest.raises(FieldrlError, match=str(db)):
        tuning.trials_frame(folder)


# ----------------------------------------------------------------------------- 6. edited trials


@pytest.mark.parametrize(
    ("sql", "pieces"),
    [
        ("update trial_values set value = NULL", ["trial 0: value = None"]),
        ("update trial_values set value = 'abc'", ["trial 0: value = 'abc'", "finite number"]),
        (
            "update trial_user_attributes set value_json = '\"abc\"' where key = 'n_envs'",
            ["trial 0: user attribute n_envs = 'abc'", "integer"],
        ),
        (
            "update trial_user_attributes set value_json = '{oops' where key = 'hyperparameters'",
            ["trial 0: user attribute hyperparameters = '{oops'", "valid JSON"],
        ),
        ("delete from trial_user_attributes where key = 'n_envs'", ["trial 0: user attribute n_envs"]),
        (
            "update trial_params set param_value = 99 where param_name = 'net_arch'",
            ["trial 0: parameter net_arch = 99.0"],
        ),
        (
            "update trial_intermediate_values set intermediate_value = NULL",
            ["trial 0: intermediate value at step"],
        ),
    ],
    ids=["null-value", "text-value", "n_envs", "json", "no-n_envs", "param", "intermediate"],
)
def test_an_edited_trial_is_one_line_naming_study_trial_and_attribute(folder, sql, pieces):
    _edit_db(folder, sql)
    _resume_refused(folder, f"study {STUDY!r}", *pieces)
    with pytest.raises(FieldrlError, match="trial 0"):
        tuning.trials_frame(folder)


# ----------------------------------------------------------------------------- 7. --resume takes no settings


@pytest.mark.parametrize(
    "option",
    [
        ["--trials", "5"],
        ["--budget", "demo"],
        ["--policy", "PPO"],
        ["--keep", "gamma"],
        ["--variant", "default"],
        ["--train-steps", "64"],
    ],
    ids=lambda option: option[0],
)
def test_resume_refuses_the_settings_the_folder_holds(folder, option):
    _resume_refused_with(folder, option)


def _resume_refused_with(folder: Path, option: list[str]) -> None:
    before = _state(folder)
    one_line_exit_2(
        ["tune", "--resume", str(folder), *option, "--quiet"],
        f"--resume DIR takes no {option[0]}",
        "the tuning folder holds them",
    )
    assert _state(folder) == before


# ----------------------------------------------------------------------------- 8. --keep n_envs, n_steps


def test_keep_n_envs_and_n_steps_tunes_with_the_entry_s_own_values(tmp_path):
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(_tunable(copy.deepcopy(TINY_SCENARIO))))
    out = tmp_path / "t"
    args = ["tune", str(file), "--trials", "2", "--out", str(out), "--keep", "n_envs", "--keep", "n_steps"]
    result = cli.invoke(app, [*args, "--quiet"])
    assert result.exit_code == 0, result.output
    rows = tuning.trials_frame(out).to_dict("records")
    assert [row["state"] for row in rows] == ["COMPLETE", "COMPLETE"]
    assert all(row["n_envs"] == 4 for row in rows)  # the entry's own
    sampled = next(row for row in rows if not row["handset"])
    assert "n_steps" not in json.loads(sampled["hyperparameters"])  # the entry's 32 stays
    assert "n_envs" not in json.loads(sampled["params"]) and "n_steps" not in json.loads(sampled["params"])


@pytest.mark.parametrize(
    ("algorithm", "kept"),
    [
        ("ppo", "n_steps"),
        ("ppo", "n_envs"),
        ("ppo", "n_epochs"),
        ("trpo", "n_steps"),
        ("sac", "learning_starts"),
        ("sac", "train_freq"),
        ("sac", "gradient_steps"),
        ("dqn", "learning_starts"),
        ("dqn", "target_update_interval"),
    ],
)
def test_every_kept_hyperparameter_keeps_the_entry_s_value(algorithm, kept):
    space = {k: v for k, v in search_space(algorithm, 4).items() if k != kept}
    sample = {
        k: d.choices[-1] if isinstance(d, CategoricalDistribution) else d.high for k, d in space.items()
    }
    own = {"n_steps": 64, "learning_starts": 100, "train_freq": 2, "gradient_steps": 2, "n_epochs": 3}
    hp, n_envs = to_hyperparameters(algorithm, sample, 256, 1, own, 4)
    assert kept not in hp
    if kept == "n_envs":
        assert n_envs == 4
    if algorithm == "sac" and kept == "train_freq":  # fitted against the entry's train_freq
        assert hp["gradient_steps"] <= own["train_freq"] * n_envs


# ----------------------------------------------------------------------------- 9. a full disk


def _no_space(fd: int) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_during_a_trial_is_one_line_naming_tune_resume(folder, monkeypatch):
    _set_trials(folder, 2)
    monkeypatch.setattr(fieldrl.files.os, "fsync", _no_space)
    message = one_line_exit_2(
        ["tune", "--resume", str(folder), "--quiet"], "No space left on device", "fieldrl tune --resume"
    )
    assert "fieldrl run" not in message
    monkeypatch.undo()  # space freed: the resume it advises finishes the study
    resumed = cli.invoke(app, ["tune", "--resume", str(folder), "--quiet"])
    assert resumed.exit_code == 0, resumed.output
    assert len(tuning.trials_frame(folder).query("state == 'COMPLETE'")) == 2


def test_a_full_disk_under_study_db_is_one_line_naming_tune_resume(folder, monkeypatch):
    _set_trials(folder, 2)

    def disk_full(*args, **kwargs):
        """What Optuna raises when SQLite cannot commit (SQLITE_FULL), wrapped as Optuna wraps it."""
        try:
            raise sqlalchemy.exc.OperationalError(
                "UPDATE trials", {}, sqlite3.OperationalError("database or disk is full")
            )
        except sqlalchemy.exc.OperationalError as exc:
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from exc

    monkeypatch.setattr(optuna.storages.RDBStorage, "set_trial_state_values", disk_full)
    message = one_line_exit_2(
        ["tune", "--resume", str(folder), "--quiet"],
        str(folder / study_store.DB_FILE),
        "database or disk is full",
        "fieldrl tune --resume",
    )
    assert "fieldrl run" not in message


def test_a_run_folder_keeps_its_own_advice_on_a_full_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(fieldrl.files.os, "fsync", _no_space)
    with pytest.raises(FieldrlError, match="fieldrl run --resume RUN_DIR"):
        fieldrl.files.atomic_write_bytes(tmp_path / "x", b"x")
