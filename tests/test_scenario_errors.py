"""Every class of bad scenario ends with one message naming file, field, value and
what is allowed; exit status 2; no traceback; nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.errors import ScenarioError
from fieldrl.scenario import load_scenario

runner = CliRunner()


def mutate(data: dict, path: str, value) -> dict:
    """Set a dotted path (list indices as numbers) in a nested dict/list."""
    parts = path.split(".")
    node = data
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    last = parts[-1]
    node[int(last) if last.isdigit() else last] = value
    return data


BAD_CASES = [
    # (mutation path, value, expected substrings in the message)
    ("colour", "red", ["colour", "unknown field", "allowed fields: name, domain"]),
    ("policies.learned.0.n_envs", "many", ["policies.learned[0].n_envs", "'many'", "integer"]),
    ("episodes_per_seed", 0, ["episodes_per_seed", "= 0", "greater than or equal to 1"]),
    ("params.max_t", -5, ["params.max_t", "-5", "greater than or equal to 1"]),
    ("params.preset", "s9", ["params.preset", "'s9'", "'s1'"]),
    ("params.speed", 3, ["params.speed", "unknown field", "allowed fields: preset"]),
    ("domain", "mars", ["domain", "'mars'", "allowed: chemo"]),
    ("policies.heuristics.0.use", "magic", ["policies.heuristics[0].use", "'magic'", "allowed:", "pulsed"]),
    (
        "policies.heuristics.1.settings.dose",
        1.5,
        ["policies.heuristics[1].settings.dose", "1.5", "less than"],
    ),
    ("policies.learned.0.name", "x" * 41, ["policies.learned[0].name", "'xxxx", "at most 40 characters"]),
    ("policies.heuristics.0.name", "y" * 41, ["policies.heuristics[0].name", "at most 40 characters"]),
    ("policies.learned.0.algorithm", "ppo2", ["policies.learned[0].algorithm", "'ppo2'", "allowed:", "sac"]),
    (
        "policies.learned.0.hyperparameters.learning_rat",
        0.1,
        ["hyperparameters.learning_rat", "not a parameter of ppo", "learning_rate"],
    ),
    (
        "policies.learned.0",
        {"algorithm": "dqn", "train_steps": 100},
        ["policies.learned[0]", "dqn cannot be built", "Discrete"],
    ),
    ("policies.learned.0.policy", "CnnLstm", ["policies.learned[0]", "CnnLstm", "cannot be built"]),
    (
        "policies.learned.0.hyperparameters.batch_size",
        0,
        ["policies.learned[0]", "batch_size", "cannot be built"],
    ),
    ("seeds.eval", [0, 1], ["seeds", "disjoint", "[0]"]),
    ("seeds.train", {"start": 0, "count": 0}, ["seeds.train", "count >= 1"]),
    ("policies.heuristics.1.name", "no treatment", ["policies", "unique", "no treatment"]),
    (
        "report.comparisons",
        [{"policy": "PPO", "baseline": "DQN"}],
        ["report.comparisons[0].baseline", "'DQN'"],
    ),
    ("report.primary_kpi", "profit", ["report.primary_kpi", "'profit'", "tumour_burden"]),
    ("report.selection_kpi", "profit", ["report.selection_kpi", "'profit'", "tumour_burden"]),
]


@pytest.mark.parametrize("path,value,expected", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_scenario_gives_one_clear_message_and_exit_2(
    scenario_data, write_scenario, tmp_path: Path, path, value, expected
):
    file = write_scenario(mutate(scenario_data, path, value))
    out_dir = tmp_path / "run"
    for args in (["validate", "--build", str(file)], ["run", str(file), "--out", str(out_dir), "--quiet"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        message = result.output.strip()
        assert "Traceback" not in message
        assert len(message.splitlines()) <= 3, message  # one message (rich may wrap it)
        flat = " ".join(message.split())
        assert str(file) in flat.replace(" ", "") or file.name in flat
        for piece in expected:
            assert piece in flat, f"{piece!r} not in {flat!r}"
    assert not out_dir.exists()


def test_yaml_syntax_error_names_line(write_scenario):
    file = write_scenario("name: x\ndomain: chemo\npolicies: [unclosed\n")
    result = runner.invoke(app, ["validate", str(file)])
    assert result.exit_code == 2
    assert "YAML syntax error" in result.output and "line" in result.output


def test_missing_required_field_is_named(scenario_data, write_scenario):
    del scenario_data["seeds"]
    with pytest.raises(ScenarioError) as info:
        load_scenario(write_scenario(scenario_data))
    assert info.value.field == "seeds" and "required" in str(info.value)


def test_unknown_scenario_name_lists_builtins(tmp_path):
    result = runner.invoke(app, ["run", "chemo/nope", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "chemo/quick" in result.output
    assert not (tmp_path / "x").exists()


def test_bad_cli_arguments_exit_2(tmp_path):
    assert runner.invoke(app, ["run", "chemo/quick", "--budget", "huge"]).exit_code == 2
    assert runner.invoke(app, ["run", "chemo/quick", "--jobs", "0"]).exit_code == 2


def test_existing_output_folder_is_refused_without_touching_it(tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = runner.invoke(app, ["run", "chemo/quick", "--out", str(out), "--quiet"])
    assert result.exit_code == 2 and "already exists" in result.output
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_real_process_exit_status_and_no_traceback(scenario_data, write_scenario):
    file = write_scenario(mutate(scenario_data, "domain", "mars"))
    proc = subprocess.run(
        [sys.executable, "-m", "fieldrl.cli", "validate", str(file)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "mars" in proc.stderr
    assert proc.stdout == ""


def test_builtin_scenarios_are_valid():
    from fieldrl.domains import missing_extra
    from fieldrl.scenario import builtin_scenarios

    names = builtin_scenarios()
    assert "chemo/quick" in names and "chemo/full" in names
    for name in [n for n in names if missing_extra(n.split("/")[0]) is None]:
        scenario = load_scenario(name)
        assert not set(scenario.seeds.train) & set(scenario.seeds.eval)
