"""Reading a finished run folder builds nothing: `fieldrl report`, `fieldrl compare` and
`api.summary_of` validate the run's scenario without building its models or starting a simulator,
so they import no torch, SB3 or simulator stack (each a fresh process, as `validate`'s test checks it);
training and evaluating a run folder (`open_run` with its default, ``build=True``) still build."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import TINY_SCENARIO

from fieldrl import api

#: what reading a chemo run must not import: the RL stack and every simulator's heavy stack (chemo's
#: domain needs no Gymnasium either; other domains' objects import it for their spaces)
HEAVY = (
    "torch",
    "stable_baselines3",
    "sb3_contrib",
    "gymnasium",
    "flatland",
    "cvxpy",
    "libsumo",
    "sumo_rl",
    "ray",
)

_PROBE = """
import json, sys
call = sys.argv[1]
if call == "summary_of":
    from fieldrl import api
    api.summary_of(sys.argv[2])
elif call == "open_run":
    from fieldrl import api
    api.open_run(sys.argv[2])
else:
    from fieldrl.cli import app
    app(sys.argv[1:], standalone_mode=False)
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.stdin.read())))
print(json.dumps(heavy))
"""


def _imports(*args: str) -> list[str]:
    """Which of ``HEAVY`` a fresh process imports to do ``args`` (a CLI command, or an API call)."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], input=json.dumps(HEAVY), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def finished_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two evaluated and reported tiny chemo runs (the second a copy of the first, under another name)."""
    root = tmp_path_factory.mktemp("light")
    scenario = root / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(copy.deepcopy(TINY_SCENARIO), sort_keys=False))
    first = api.run(scenario, out=root / "one", budget="demo", show_progress=False).run_dir
    second = root / "two"
    shutil.copytree(first, second)
    return first, second


def test_report_of_a_finished_run_imports_no_torch(finished_runs):
    run_dir, _ = finished_runs
    (run_dir / "report.pdf").unlink()
    assert _imports("report", str(run_dir)) == []
    assert (run_dir / "report.pdf").is_file()


def test_compare_of_two_runs_imports_no_torch(finished_runs):
    assert _imports("compare", *map(str, finished_runs)) == []


def test_summary_of_imports_no_torch(finished_runs):
    assert _imports("summary_of", str(finished_runs[0])) == []


def test_opening_a_run_to_train_or_evaluate_still_builds(finished_runs):
    """`open_run`'s default (what train, evaluate and export use) builds each model, as before."""
    assert {"torch", "stable_baselines3"} <= set(_imports("open_run", str(finished_runs[0])))


def test_the_report_reads_the_curve_files_training_writes():
    """The report's copy of the curve files' names and columns (kept apart so that a report imports
    no torch) equals what training writes."""
    from fieldrl.policies import learned, selection
    from fieldrl.reports import pdf

    assert (pdf.CURVE_FILE, pdf.CURVE_COLUMNS) == (learned.CURVE_FILE, learned.CURVE_COLUMNS)
    assert (pdf.VALIDATION_FILE, pdf.VALIDATION_COLUMNS) == (learned.VALIDATION_FILE, selection.CURVE_COLUMNS)
