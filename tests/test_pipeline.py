"""End to end: scenario -> training -> evaluation -> results -> PDF, through the CLI and the API."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from pypdf import PdfReader
from typer.testing import CliRunner

import fieldrl
from fieldrl.cli import app
from fieldrl.evaluation.runner import RESULT_COLUMNS

runner = CliRunner()


def pdf_text(path: Path) -> str:
    return " ".join(" ".join((page.extract_text() or "").split()) for page in PdfReader(path).pages)


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory) -> Path:
    from conftest import TINY_SCENARIO

    path = tmp_path_factory.mktemp("scenario") / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_SCENARIO, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def tiny_run(tiny_file, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "first"
    result = runner.invoke(app, ["run", str(tiny_file), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    assert f"Report: {out / 'report.pdf'}" in " ".join(result.output.split()).replace(" ", " ")
    return out


def test_builtin_quick_scenario_produces_readable_pdf(tmp_path):
    out = tmp_path / "quick"
    result = runner.invoke(app, ["run", "chemo/quick", "--budget", "demo", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    text = pdf_text(out / "report.pdf")
    assert "Key findings" in text
    assert "the best learned policy" in text and "the best standard policy" in text
    for header in ("Final tumour burden", "Survival", "Total dose", "tumour feedback", "SAC", "PPO"):
        assert header in text
    assert "Appendix" in text


def test_results_table_is_long_format_with_every_policy_on_the_same_seeds(tiny_run):
    results = pd.read_parquet(tiny_run / "results.parquet")
    assert list(results.columns) == RESULT_COLUMNS
    assert set(results["policy"]) == {"no treatment", "constant 0.5", "PPO"}
    assert set(results["metric"]) == {"return", "tumour_burden", "normal_cells", "survival", "total_dose"}
    seeds = results.groupby("policy")["eval_seed"].apply(lambda s: tuple(sorted(set(s))))
    assert seeds.nunique() == 1 and seeds.iloc[0] == tuple(range(100, 106))
    assert (results.loc[results["kind"] == "heuristic", "train_seed"] == -1).all()
    assert (results.loc[results["kind"] == "learned", "train_seed"] == 0).all()
    assert len(results) == 3 * 6 * 5


def test_run_folder_holds_everything_with_a_manifest(tiny_run):
    manifest = json.loads((tiny_run / "manifest.json").read_text())["files"]
    for rel in (
        "scenario.yaml",
        "versions.json",
        "results.parquet",
        "summary.json",
        "report.pdf",
        "models/default/PPO/seed-0/policy.safetensors",
        "models/default/PPO/seed-0/obs_normalization.json",
    ):
        assert rel in manifest, rel
        assert (tiny_run / rel).is_file()
    assert any((tiny_run / "tensorboard").rglob("events.out.tfevents*"))
    summary = json.loads((tiny_run / "summary.json").read_text())
    ci = summary["variants"]["default"]["policies"]["PPO"]["return"]["mean"]
    assert ci["low"] <= ci["value"] <= ci["high"]


def test_same_scenario_and_seeds_give_identical_results_also_in_parallel(tiny_file, tiny_run, tmp_path):
    again = fieldrl.run(tiny_file, out=tmp_path / "again", jobs=2, show_progress=False)
    first = pd.read_parquet(tiny_run / "results.parquet")
    pd.testing.assert_frame_equal(first, again.results)
    pd.testing.assert_frame_equal(first, pd.read_parquet(again.run_dir / "results.parquet"))
    assert again.report.is_file()


def test_report_rerenders_without_training_and_interruption_keeps_old_pdf(tiny_run, monkeypatch):
    before_results = (tiny_run / "results.parquet").read_bytes()
    result = runner.invoke(app, ["report", str(tiny_run)])
    assert result.exit_code == 0, result.output
    old_pdf = (tiny_run / "report.pdf").read_bytes()
    assert (tiny_run / "results.parquet").read_bytes() == before_results

    from fieldrl.reportkit import figures

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(figures, "learning_curves", interrupted)
    result = runner.invoke(app, ["report", str(tiny_run)])
    assert result.exit_code == 130
    assert (tiny_run / "report.pdf").read_bytes() == old_pdf
    assert not list(tiny_run.glob(".report.pdf.*"))


def test_a_medium_budget_report_says_so_on_its_front_page(tiny_run):
    from fieldrl.evaluation.store import RunFolder
    from fieldrl.reports.pdf import build_report
    from fieldrl.scenario import load_scenario

    folder = RunFolder(tiny_run)
    scenario = load_scenario(tiny_run / "scenario.yaml")
    text = pdf_text(build_report(folder, scenario, {"budget": "medium"}))
    assert "this run used the scenario's 'medium' budget" in text
    assert "'medium' budget" not in pdf_text(build_report(folder, scenario, {"budget": "full"}))


def test_evaluate_refuses_tampered_model(tiny_file, tmp_path):
    run_dir = fieldrl.train(tiny_file, out=tmp_path / "t", show_progress=False)
    model = run_dir / "models/default/PPO/seed-0/policy.safetensors"
    model.write_bytes(model.read_bytes() + b"\0")
    result = runner.invoke(app, ["evaluate", str(run_dir), "--quiet"])
    assert result.exit_code == 2
    assert "does not match the manifest" in " ".join(result.output.split())
    assert not (run_dir / "results.parquet").exists()


def test_compare_lists_kpis_across_runs(tiny_run, tmp_path):
    import shutil

    other = shutil.copytree(tiny_run, tmp_path / "second")
    result = runner.invoke(app, ["compare", str(tiny_run), str(other)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Survival (%)" in result.output and "PPO" in result.output  # KPI labels, not names
    assert result.output.count("no treatment") == 2  # one row per run


def test_report_on_unevaluated_or_foreign_folder_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "not a fieldrl run folder" in " ".join(result.output.split())


def _spawned_workers(group: int) -> int:
    import subprocess

    found = subprocess.run(["pgrep", "-g", str(group), "-f", "spawn_main"], capture_output=True, text=True)
    return len(found.stdout.split())


@pytest.mark.parametrize("when", ["training", "workers starting"])
def test_ctrl_c_stops_a_parallel_run_cleanly(tmp_path, when):
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import TINY_SCENARIO

    data = json.loads(json.dumps(TINY_SCENARIO))
    data["policies"]["learned"][0]["train_steps"] = 10**6  # still training when interrupted
    data["seeds"]["train"] = [0, 1]
    scenario = tmp_path / "long.yaml"
    scenario.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fieldrl.cli", "run", str(scenario), "--out", str(out), "--jobs", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # a test runner started in the background by a script ignores SIGINT, and so would the
        # run it starts (as a shell's background job should); a terminal's Ctrl-C is what we test
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    if when == "training":
        while not any((out / "tensorboard").rglob("events.out.tfevents*")) and time.monotonic() < deadline:
            time.sleep(0.5)
    else:  # the event manager and both workers exist and are still importing
        while _spawned_workers(proc.pid) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "Traceback" not in output and "interrupted" in output
    assert not (out / "results.parquet").exists() and not (out / "report.pdf").exists()
    leftovers = "?"
    for _ in range(20):  # helper processes (manager, resource tracker) may take a moment to exit
        leftovers = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout
        if not leftovers:
            break
        time.sleep(0.5)
    assert leftovers == "", f"processes of the run still alive: {leftovers}"


def test_requested_comparisons_are_summarised_per_variant_and_reported(scenario_data, tmp_path):
    scenario_data["variants"] = {"s1": {"preset": "s1"}, "s4": {"preset": "s4"}}
    scenario_data["policies"]["learned"].append({"algorithm": "a2c", "name": "A2C", "train_steps": 128})
    scenario_data["report"] = {"comparisons": [{"policy": "PPO", "baseline": "A2C"}]}
    scenario_data["seeds"]["eval"] = [100, 101, 102]
    path = tmp_path / "pairs.yaml"
    path.write_text(yaml.safe_dump(scenario_data))
    result = fieldrl.run(path, out=tmp_path / "run", show_progress=False)
    for variant in ("s1", "s4"):
        setting = result.summary.variant(variant)
        pair = setting.pairs[0]
        assert (pair.policy, pair.baseline) == ("PPO", "A2C")
        assert setting.pair("PPO", "A2C") == pair
        diff = pair.kpis["return"].difference
        expected = setting.value("PPO", "return") - setting.value("A2C", "return")
        assert diff.value == pytest.approx(expected)
        assert diff.low <= diff.value <= diff.high
    text = pdf_text(result.report)
    assert "PPO compared with A2C" in text and "PPO against A2C" in text


def test_ctrl_c_while_the_cli_is_still_starting_is_one_line_not_a_traceback():
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        # `validate --build` imports torch and SB3 (`list` and plain `validate` are done within 1 s)
        [sys.executable, "-m", "fieldrl.cli", "validate", "--build", "chemo/quick"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(1.0)  # past Python's own start-up, inside the imports of torch and SB3
    os.killpg(proc.pid, signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "Traceback" not in output and "interrupted" in output, output
