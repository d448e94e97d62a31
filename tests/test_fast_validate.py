"""`fieldrl validate` checks a scenario without torch or a simulator's heavy stack (about a
second); `--build` (and every `run`) also builds each heuristic and learned model first."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fieldrl.cli import app
from fieldrl.domains import missing_extra
from fieldrl.scenario import builtin_scenarios

cli = CliRunner()

#: what a fast validate must not import (each costs 0.5-2 s)
HEAVY = ("torch", "stable_baselines3", "sb3_contrib", "flatland", "cvxpy", "libsumo", "sumo_rl", "ray")

_PROBE = """
import json, sys
from fieldrl.cli import app
try:
    app(["validate", *sys.argv[1:]], standalone_mode=False)
except SystemExit:
    pass
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.stdin.read())))
print(json.dumps(heavy))
"""


def _heavy_imports(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], input=json.dumps(HEAVY), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_validate_of_every_builtin_scenario_imports_nothing_heavy():
    for name in builtin_scenarios():
        if missing_extra(name.split("/")[0]) is None:  # a domain whose extra is installed
            assert _heavy_imports(name) == [], name


def test_validate_build_does_build(scenario_data, write_scenario):
    assert "torch" in _heavy_imports(str(write_scenario(scenario_data)), "--build")


def test_the_signatures_table_matches_the_algorithm_classes():
    """The written-out signatures (fast validate reads them) equal the live SB3 classes."""
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

    from fieldrl.policies.registry import ALGORITHMS, RESERVED
    from fieldrl.policies.signatures import SIGNATURE_DEFAULT_KEYS, SIGNATURES

    assert set(SIGNATURES) == set(ALGORITHMS)
    for name, cls in ALGORITHMS.items():
        params = inspect.signature(cls.__init__).parameters
        live = tuple(p for p in params if p != "self" and p not in RESERVED)
        written = SIGNATURES[name]
        assert written.parameters == live, name
        assert written.kind == ("on" if issubclass(cls, OnPolicyAlgorithm) else "off"), name
        defaults = {k: params[k].default for k in SIGNATURE_DEFAULT_KEYS if k in params}
        assert written.defaults == defaults, name


def test_fast_validate_refuses_budgets_that_cannot_train(scenario_data, write_scenario):
    scenario_data["policies"]["learned"][0]["hyperparameters"]["n_steps"] = 128  # x 4 envs > 256 steps
    result = cli.invoke(app, ["validate", str(write_scenario(scenario_data))])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "hyperparameters.n_steps = 128" in flat, flat


def test_what_only_building_can_judge_is_refused_by_build_and_by_run(scenario_data, write_scenario, tmp_path):
    """An image policy on a vector observation: only SB3's constructor can tell."""
    scenario_data["policies"]["learned"][0]["policy"] = "CnnPolicy"
    file = write_scenario(scenario_data)
    fast = cli.invoke(app, ["validate", str(file)])
    assert fast.exit_code == 0 and "not built" in fast.output
    for args in (
        ["validate", "--build", str(file)],
        ["run", str(file), "--out", str(tmp_path / "r"), "--quiet"],
    ):
        result = cli.invoke(app, args)
        flat = " ".join(result.output.split())
        assert result.exit_code == 2 and "cannot be built" in flat and "Traceback" not in flat, flat
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("domain", ["rail", "traffic"])
def test_simulator_checks_of_params_wait_for_build(domain, tmp_path: Path):
    """A Flatland configuration no generator can lay out / a network SUMO cannot run: refused
    by --build (which starts the simulator), not by the fast check."""
    if domain == "rail":
        params = {"flatland": {"width": 16, "height": 16, "cities": 4}}
        heuristic = "greedy-shortest-route"
    else:
        bad = tmp_path / "bad.net.xml"
        bad.write_text('<net version="1.9"><edge id="e" from="a" to="b"/></net>')
        params = {"net_file": str(bad)}
        heuristic = "fixed-time"
    scenario = {
        "name": "mine",
        "domain": domain,
        "params": params,
        "policies": {"heuristics": [{"use": heuristic}]},
        "seeds": {"train": [0], "eval": {"start": 10, "count": 1}},
    }
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(scenario))
    assert cli.invoke(app, ["validate", str(file)]).exit_code == 0
    built = cli.invoke(app, ["validate", "--build", str(file)])
    assert built.exit_code == 2 and "Traceback" not in built.output, built.output
