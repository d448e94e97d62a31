"""The command line answers fast, fits 80 columns, names each setting and keeps third-party noise out."""

from __future__ import annotations

import io
import math
import os
import subprocess
import sys
from typing import Any

import pandas as pd
import pytest
from rich.console import Console
from typer.testing import CliRunner

import fieldrl
from fieldrl import terminal
from fieldrl.cli import app
from fieldrl.domains import get_domain
from fieldrl.estimates import duration_text, workload
from fieldrl.progress import JobProgress
from fieldrl.results import Summary
from fieldrl.scenario import builtin_scenarios, load_scenario

runner = CliRunner()


def _stat(value: float, half: float = 0.5, n: int = 20) -> dict[str, Any]:
    s = {"value": value, "low": value - half, "high": value + half}
    return {"mean": s, "iqm": s, "n_train_seeds": 1, "n_eval_seeds": n}


def _kpis(n: int) -> list[dict[str, Any]]:
    return [
        {
            "name": f"k{i}",
            "label": f"Mean pedestrian delay kpi{i} (all road users)",
            "unit": "people/min",
            "higher_is_better": i % 2 == 0,
            "wall_clock": False,
            "among": None,
        }
        for i in range(n)
    ]


def summary(n_kpis: int = 9, variants: tuple[str, ...] = ("default",), n_cases: int = 20) -> Summary:
    kpis = _kpis(n_kpis)
    names = ["fixed-time", "Webster", "actuated", "max-pressure", "PPO (shared)"]
    entry = {
        "policies": {
            p: {k["name"]: _stat(1234.5 + j, 0.4567, n_cases) for k in kpis} for j, p in enumerate(names)
        },
        "best_heuristic": "Webster",
        "best_learned": "PPO (shared)",
    }
    return Summary.model_validate(
        {
            "scenario": "traffic-quick",
            "confidence": 0.95,
            "bootstrap_samples": 100,
            "primary_kpi": kpis[0]["name"],
            "kpis": kpis,
            "policies": [{"name": p, "kind": "learned" if "PPO" in p else "heuristic"} for p in names],
            "variants": {v: entry for v in variants},
        }
    )


def render(tables: list[Any], width: int = 80) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    for t in tables:
        console.print(t)
    return console.export_text()


# ----------------------------------------------------------------------------- help, version, API


def test_help_shows_flags_without_a_bool_type_and_offers_version() -> None:
    for args in (["--help"], ["run", "--help"], ["evaluate", "--help"]):
        result = runner.invoke(app, args, env={"COLUMNS": "80"})
        assert result.exit_code == 0
        assert "<bool>" not in result.output
    assert "--version" in runner.invoke(app, ["--help"]).output
    assert "--quiet" in runner.invoke(app, ["run", "--help"]).output
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"fieldrl {fieldrl.__version__}"


def test_dir_fieldrl_shows_the_api() -> None:
    shown = dir(fieldrl)
    for name in ("run", "train", "evaluate", "report", "compare", "validate", "resume", "load_model"):
        assert name in shown
    assert callable(fieldrl.load_model)


def test_help_version_and_list_import_neither_torch_nor_a_domain() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from fieldrl.cli import app\n"
        "for args in (['--help'], ['--version'], ['list']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0, args\n"
        "heavy = [m for m in ('torch', 'stable_baselines3', 'fieldrl.api', 'fieldrl.domains.chemo',\n"
        "         'scipy.stats', 'matplotlib') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ----------------------------------------------------------------------------- list and validate


def test_list_names_every_builtin_with_its_file_and_expected_times() -> None:
    result = runner.invoke(app, ["list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for name in builtin_scenarios():
        assert name in text
    assert "demo ≈" in text and "full ≈" in text and "medium ≈" in text  # chemo/memory, rail/levels
    assert f"{terminal.scenarios_root()}/DOMAIN/NAME.yaml" in "".join(result.output.split())
    assert "Dosing a chemotherapy drug" in text  # chemo/quick's description
    assert all(len(line) <= 80 for line in result.output.splitlines())


def test_list_domain_shows_its_heuristics_and_kpis_and_refuses_an_unknown_one() -> None:
    result = runner.invoke(app, ["list", "chemo"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert "tumour-feedback" in result.output and "tumour_burden" in result.output
    bad = runner.invoke(app, ["list", "chem"])
    assert bad.exit_code == 2 and "allowed: chemo" in bad.output


def test_validate_budget_says_steps_episodes_and_time(scenario_data, write_scenario) -> None:
    path = write_scenario(scenario_data)
    result = runner.invoke(app, ["validate", str(path), "--budget", "demo"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    # quick: 256 steps, 3 eval seeds; 3 policy runs (2 heuristics + PPO x 1 seed)
    assert "budget demo" in text and "256 env steps in all" in text and "PPO: 256 steps" in text
    assert "held-out test: 9 episodes" in text and "expected time: ≈" in text
    full = runner.invoke(app, ["validate", str(path)])
    assert "held-out test: 18 episodes" in " ".join(full.output.split())
    medium = runner.invoke(app, ["validate", str(path), "--budget", "medium"])
    assert medium.exit_code == 2 and "this scenario defines: full, demo" in medium.output


def test_workload_counts_steps_runs_and_episodes(scenario_data, write_scenario) -> None:
    scenario_data["variants"] = {"s1": {"preset": "s1"}, "s2": {"preset": "s2"}}
    scenario_data["seeds"]["train"] = [0, 1]
    scenario_data["seeds"]["validation"] = {"start": 50, "count": 2}
    scenario_data["policies"]["learned"][0]["validate_every"] = 128
    load = workload(load_scenario(write_scenario(scenario_data)))
    assert load.training_runs == 4 and load.train_steps == 4 * 256
    assert load.steps_by_policy == {"PPO": 1024}
    assert load.eval_episodes == 2 * (2 + 2) * 6
    # per setting: 2 seeds x 2 validation cases x (3 checkpoints per training x 2 trainings + 2 heuristics)
    assert load.validation_episodes == 2 * 2 * (3 * 2 + 2)
    # decision differences: 6 held-out episodes per setting, and the replay's two episodes and its drawing
    assert load.explain_episodes == 2 * 6 + 2
    chemo = get_domain("chemo").speed
    assert math.isclose(load.seconds("chemo"), 10 + 15 + 1024 / chemo.on_policy + 94 * chemo.episode_s)


def test_duration_text_rounds_to_what_a_reader_plans_with() -> None:
    assert [duration_text(s) for s in (3, 44, 200, 5400, 40_000, 400_000)] == [
        "≈ 10 s",
        "≈ 40 s",
        "≈ 3 min",
        "≈ 1.5 h",
        "≈ 11 h",
        "≈ 5 days",
    ]


def test_algorithm_names_match_the_registry() -> None:
    from fieldrl.policies.registry import ALGORITHMS

    assert set(terminal.ALGORITHM_NAMES) == set(ALGORITHMS)


# ----------------------------------------------------------------------------- tables


def test_summary_tables_fit_80_columns_with_every_header_word_whole() -> None:
    text = render(terminal.summary_tables(summary(n_kpis=9), 80))
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "…" not in text
    assert "(table 1 of" in text
    for word in ("pedestrian", "people/min)", "PPO", "(shared)", "1,234", "±0.457"):
        assert word in text
    for i in range(9):
        assert text.count(f"kpi{i}") == 1  # every KPI, once


def test_summary_tables_name_the_setting_and_hide_cis_below_the_minimum_sample() -> None:
    text = render(terminal.summary_tables(summary(n_kpis=2, variants=("level-0", "level-1"), n_cases=2), 80))
    assert "setting level-0" in text and "setting level-1" in text
    assert "±" not in text and "no CI" in text


def test_split_columns_balances_the_tables() -> None:
    assert terminal.split_columns([10] * 7, first=20, total=80) == [[0, 1, 2, 3], [4, 5, 6]]
    assert terminal.split_columns([10] * 4, first=20, total=80) == [[0, 1, 2, 3]]


def _compare_frame() -> pd.DataFrame:
    rows = []
    for run, domain, kpis in (("chemo-run", "chemo", ["survival"]), ("traffic-run", "traffic", ["delay"])):
        for kpi in kpis:
            rows.append(
                {
                    "run": run,
                    "domain": domain,
                    "variant": "default",
                    "policy": "PPO",
                    "kpi": kpi,
                    "label": kpi.title(),
                    "unit": "%",
                    "higher_is_better": True,
                    "n_cases": 30,
                    "mean": 50.0,
                    "low": 40.0,
                    "high": 60.0,
                }
            )
    return pd.DataFrame(rows)


def test_compare_across_domains_shows_one_table_per_domain(monkeypatch) -> None:
    from fieldrl import api

    monkeypatch.setattr(api, "compare", lambda dirs: _compare_frame())
    result = runner.invoke(app, ["compare", "a", "b"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "chemo: mean ± 95 % CI half-width" in text and "traffic: mean ± 95 % CI half-width" in text
    assert "Survival (%)" in text and "Delay (%)" in text and "policy" in text


# ----------------------------------------------------------------------------- progress and noise


def test_progress_lines_name_the_setting() -> None:
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=False, width=100)
    with JobProgress("training", 2, console=console) as progress:
        for key in ("train PPO (shared) seed 0 [level-0]", "train PPO (shared) seed 0 [level-1]"):
            progress(("start", key, 10))
            progress(("done", key, 10))
    text = stream.getvalue()
    assert "seed 0 [level-0] done" in text and "seed 0 [level-1] done" in text


def test_quiet_stdout_drops_sumo_noise_and_keeps_the_rest(capsys) -> None:
    from fieldrl.domains.traffic import sumo

    with sumo.quiet_stdout():
        print(" Retrying in 1 seconds")
        print("Warning! pyarrow is installed with version 21.0.0 which might be incompatible")
        print(" Try to uninstall pyarrow or install a matching pyarrow version")
        print("SUMO said something that matters")
    assert capsys.readouterr().out == "SUMO said something that matters\n"


def test_a_traffic_episode_prints_no_libsumo_noise(tmp_path) -> None:
    code = (
        "from fieldrl.domains.traffic.env import TrafficEnv\n"
        "from fieldrl.domains.traffic.params import PeriodModel, TrafficParams\n"
        "p = [PeriodModel(name='p', duration_s=60, vehicles_main=300, vehicles_side=100, pedestrians=100)]\n"
        "env = TrafficEnv(TrafficParams(periods=p))\n"
        "env.reset(seed=0)\n"
        "env.close()\n"
    )
    env = {**os.environ, "FIELDRL_TRAFFIC_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "pyarrow" not in done.stdout + done.stderr
    assert "Retrying in" not in done.stdout + done.stderr


def test_loading_a_model_for_evaluation_prints_no_sb3_batch_size_advice(tmp_path) -> None:
    """The model is rebuilt on one env only to predict: SB3's advice about training batches is noise."""
    import warnings
    from functools import partial

    from fieldrl.domains import get_domain
    from fieldrl.domains.chemo.params import ChemoParams
    from fieldrl.policies.learned import build_model, load_policy
    from fieldrl.policies.weights import policy_bytes
    from fieldrl.scenario import LearnedEntry

    domain = get_domain("chemo")
    make = partial(domain.make_train_vec_env, ChemoParams(preset="s1", max_t=10))
    entry = LearnedEntry(
        algorithm="ppo", train_steps=64, n_envs=4, hyperparameters={"n_steps": 64, "batch_size": 128}
    )
    venv = make(4, 0)
    model = build_model(entry.training_spec(), venv)
    venv.close()
    (tmp_path / "w.safetensors").write_bytes(policy_bytes(model.policy.state_dict(), {}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        policy = load_policy("PPO", entry.training_spec(), make, tmp_path / "w.safetensors", None)
    assert policy.model.n_steps == 64


def test_off_policy_cost_follows_the_updates_per_env_step(scenario_data, write_scenario) -> None:
    """SAC with 16 envs makes a quarter of the gradient steps per env step that 4 envs make: cheaper."""
    scenario_data["policies"]["learned"] = [
        {"algorithm": "sac", "name": f"SAC{n}", "train_steps": 4096, "n_envs": n, "hyperparameters": {}}
        for n in (4, 16)
    ]
    load = workload(load_scenario(write_scenario(scenario_data)))
    assert load.steps_by_policy == {"SAC4": 4096, "SAC16": 4096}
    assert math.isclose(load.off_policy_steps, 4096 + 4096 / 4)  # weighted by updates per env step


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["run", "chemo/quick", "--jobs", "0"], "'--jobs'"),
        (["run", "chemo/quick", "--budget", "nope"], "'nope'"),
        (["tune", "chemo/quick", "--trials", "0"], "'--trials'"),
        (["compare"], "'run_dirs'"),
        (["frobnicate"], "'frobnicate'"),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(args, named):
    """Click's usage block (Usage:, Try ..., Error:) was three lines; the console script says one."""
    done = subprocess.run(
        [sys.executable, "-c", "from fieldrl.cli import main; main()", *args], capture_output=True, text=True
    )
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error:") and named in lines[0] and "--help" in lines[0], lines


def test_resume_refuses_a_budget_instead_of_ignoring_it(tmp_path):
    """`run --resume R --budget full` once finished R at its own budget without a word."""
    result = runner.invoke(app, ["run", "--resume", str(tmp_path), "--budget", "full"])
    assert result.exit_code == 2 and "--budget" in result.output and "Traceback" not in result.output
