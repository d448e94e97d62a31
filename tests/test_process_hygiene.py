"""Process hygiene (issue 22, defect 3): workers and the manager die with the run that started them
(kill -9 included), SIGTERM is handled like Ctrl-C (one line, exit 143), and a run folder has one
writer at a time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fieldrl import api
from fieldrl.cli import app

cli = CliRunner()


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc; zombies count as gone)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


WORKERS_SCRIPT = """
import sys, time
from pathlib import Path

from fieldrl.evaluation.backends import execute
from fieldrl.files import atomic_write_bytes


def job(folder, index, events):
    while True:  # what a training job does: keep writing checkpoints into the run folder
        atomic_write_bytes(Path(folder) / f"worker-{index}.txt", str(time.time()).encode())
        time.sleep(0.05)


if __name__ == "__main__":
    execute(job, [(sys.argv[1], 0), (sys.argv[1], 1)], jobs=2, on_event=lambda event: None)
"""


def _wait_for(condition, proc: subprocess.Popen, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _wait_gone(pids: set[int], timeout: float = 10.0) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = {p for p in pids if _alive(p)}
        if not left:
            return left
        time.sleep(0.1)
    return {p for p in pids if _alive(p)}


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.rglob("*") if p.is_file()}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_a_parallel_run_takes_its_workers_and_manager_with_it(tmp_path):
    script, folder = tmp_path / "workers.py", tmp_path / "run"
    script.write_text(WORKERS_SCRIPT)
    folder.mkdir()
    proc = subprocess.Popen([sys.executable, str(script), str(folder)], start_new_session=True)
    files = [folder / "worker-0.txt", folder / "worker-1.txt"]
    _wait_for(lambda: all(f.exists() for f in files), proc, "the workers never started")
    children = _children(proc.pid)
    assert len(children) >= 3  # two workers, the manager (and the resource tracker)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = _wait_gone(children, timeout=5.0)
    for pid in left:  # don't leave them to the rest of the suite
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still alive after the run was killed: {sorted(left)}"
    before = _snapshot(folder)
    time.sleep(0.5)
    assert _snapshot(folder) == before  # nothing writes into the run folder any more


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_stops_a_parallel_run_like_ctrl_c_with_exit_143(scenario_data, tmp_path):
    scenario_data["policies"]["learned"] = []
    scenario_data["params"]["max_t"] = 10_000
    scenario_data["seeds"]["eval"] = {"start": 100, "count": 5000}  # evaluation jobs of minutes
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(scenario_data, sort_keys=False))
    cmd = [sys.executable, "-m", "fieldrl.cli", "run", str(scenario), "--out", str(tmp_path / "run")]
    proc = subprocess.Popen(
        [*cmd, "--jobs", "2", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _wait_for(lambda: len(_children(proc.pid)) >= 3, proc, "the workers never started")
    time.sleep(1.0)
    children = _children(proc.pid)
    os.kill(proc.pid, signal.SIGTERM)
    try:
        _, stderr = proc.communicate(timeout=60)
        left = _wait_gone(children)
    finally:
        for pid in [proc.pid, *children]:  # whatever happened, leave nothing running
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 143, stderr
    assert "terminated (SIGTERM)" in stderr and "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr  # one line, also when stderr is a pipe
    assert not left


def test_a_run_folder_being_written_refuses_a_second_writer(scenario_data, tmp_path):
    scenario_data["policies"]["learned"] = []
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(scenario_data, sort_keys=False))
    folder = api.create_run(scenario, tmp_path / "run")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from fieldrl.evaluation.store import RunFolder\n"
            "with RunFolder(sys.argv[1]).lock():\n    print('locked', flush=True); time.sleep(60)",
            str(folder.path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        for args in (
            ["run", "--resume", str(folder.path)],
            ["evaluate", str(folder.path)],
            ["report", str(folder.path)],
        ):
            result = cli.invoke(app, [*args, "--quiet"] if args[0] != "report" else args)
            flat = " ".join(result.output.split())
            assert result.exit_code == 2, flat
            assert f"another fieldrl process (pid {holder.pid})" in flat and "Traceback" not in flat
    finally:
        holder.kill()
        holder.wait()
    # kill -9 of the holder frees the folder: no stale lock to clean up by hand
    result = cli.invoke(app, ["run", "--resume", str(folder.path), "--quiet"])
    assert result.exit_code == 0, result.output


def test_the_lock_is_reentrant_within_one_process(tmp_path):
    from fieldrl.evaluation.store import RunFolder

    folder = RunFolder(tmp_path)
    with folder.lock(), folder.lock():
        pass
    with folder.lock():  # released and taken again
        pass
