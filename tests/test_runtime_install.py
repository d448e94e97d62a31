"""The install split: ``fieldrl[runtime]`` (numpy, typer, rich, onnxruntime) runs ``fieldrl act`` without
torch, SB3 or any simulator; every other command needs ``fieldrl[train]`` and says so in one line.

The packaging is checked in pyproject.toml itself; the runtime-only install is imitated by a process in
which importing a package of the training stack or of a domain extra fails, as it would where they are
not installed. (benchmarks/runtime_install.py does the real thing in a fresh venv.)
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from conftest import TINY_SCENARIO
from packaging.requirements import Requirement

import fieldrl
from fieldrl import cli, runtime

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

#: what a runtime-only install must not pull in, named as distributions
HEAVY = {"torch", "stable-baselines3", "sb3-contrib", "gymnasium", "pettingzoo", "pandas", "scipy"}


def _name(requirement: str) -> str:
    return Requirement(requirement).name.lower().replace("_", "-")


def _project() -> dict:
    return tomllib.loads(PYPROJECT.read_text())["project"]


def _installed_with(requirements: list[str]) -> set[str]:
    """The distributions pip installs for ``requirements``, read from the metadata installed here."""
    found: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        name = _name(str(requirement))
        if name in found or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        found.add(name)
        todo += [Requirement(r) for r in metadata.requires(name) or []]
    return found


RUNTIME_REQUIREMENTS = [*_project()["dependencies"], *_project()["optional-dependencies"]["runtime"]]
#: what a runtime-only install brings, their own requirements included (typer 0.29 needs pydantic)
RUNTIME_INSTALL = _installed_with(RUNTIME_REQUIREMENTS)
#: top-level modules that cannot be imported in the imitated runtime-only install: the training stack
#: (but what the runtime's own requirements bring) and the domain extras
BLOCKED = sorted(
    {module for module, dist in cli.EXPORT_STACK.items() if dist not in RUNTIME_INSTALL}
    | {"flatland", "libsumo", "traci", "sumolib", "sumo_rl", "cvxpy", "ray"}
)

#: runs ``fieldrl ARGS...`` (argv[1:]) as the console script does, with ``BLOCKED`` not importable
FIELDRL_WITHOUT_TRAINING = textwrap.dedent(
    f"""
    import importlib.abc, sys

    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {BLOCKED!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    sys.argv = ["fieldrl", *sys.argv[1:]]
    from fieldrl.cli import main
    main()
    """
)


def fieldrl_without_training(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", FIELDRL_WITHOUT_TRAINING, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


# ----------------------------------------------------------------------------- pyproject.toml


def test_the_base_and_runtime_requirements_hold_no_training_stack():
    light = {_name(r) for r in RUNTIME_REQUIREMENTS}
    train = {_name(r) for r in _project()["optional-dependencies"]["train"]}
    assert light == {"numpy", "typer", "rich", "onnxruntime"}
    assert train >= HEAVY
    assert not RUNTIME_INSTALL & HEAVY  # nor do their own requirements bring any


def test_every_extra_but_runtime_carries_the_whole_train_list_without_naming_fieldrl():
    extras = _project()["optional-dependencies"]
    train = extras["train"]
    for name, requirements in extras.items():
        assert not any(_name(r) == "fieldrl" for r in requirements), f"{name}: self-reference"
        if name not in ("runtime", "train"):
            assert set(train) <= set(requirements), f"{name} lacks {sorted(set(train) - set(requirements))}"
    assert "numpy>=1.26,<2" in extras["rail"]  # Flatland's pin stays beside the training stack


def test_the_cli_checks_exactly_the_train_list_and_finds_it_installed_here():
    train = {_name(r) for r in _project()["optional-dependencies"]["train"]}
    assert set(cli.EXPORT_STACK.values()) == train
    assert set(cli.EXPORT_STACK.values()) - set(cli.TRAINING_STACK.values()) == {"onnx", "onnxruntime"}
    assert cli.missing_training_stack(cli.EXPORT_STACK) == []  # and the import names are right


# ----------------------------------------------------------------------------- a runtime-only process


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """The tiny chemo scenario trained only (PPO, 256 steps) and exported."""
    from fieldrl import export

    base = tmp_path_factory.mktemp("runtime-install")
    scenario = base / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(copy.deepcopy(TINY_SCENARIO), sort_keys=False))
    run_dir = fieldrl.train(scenario, out=base / "run", show_progress=False)
    return export.export_policy(run_dir, "PPO", out=base / "bundle").folder


def test_importing_fieldrl_and_its_cli_imports_no_training_stack():
    code = "import sys, fieldrl.cli; print(sorted({m.partition('.')[0] for m in sys.modules} & {*sys.argv}))"
    done = subprocess.run([sys.executable, "-c", code, *BLOCKED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_fieldrl_act_runs_without_the_training_stack(bundle):
    observations = [[0.3, 0.4, 0.2], [0.9, 0.1, 0.5]]
    done = fieldrl_without_training(
        "act", str(bundle), stdin="".join(json.dumps(o) + "\n" for o in observations)
    )
    assert done.returncode == 0, done.stderr
    loaded = runtime.Bundle.load(bundle)
    answers = [json.loads(line)["action"] for line in done.stdout.splitlines()]
    assert answers == [loaded.act(o).tolist() for o in observations]


def test_help_and_version_answer_without_the_training_stack():
    helped = fieldrl_without_training("--help")
    assert helped.returncode == 0, helped.stderr
    assert "act" in helped.stdout and "run" in helped.stdout
    version = fieldrl_without_training("--version")
    assert (version.returncode, version.stdout) == (0, f"fieldrl {fieldrl.__version__}\n")


@pytest.mark.parametrize("command", ["run", "list", "export"])
def test_other_commands_without_the_training_stack_are_one_line_exit_2(command, tmp_path):
    out = tmp_path / "out"
    args = {
        "run": ["run", "chemo/quick", "--budget", "demo", "--out", str(out)],
        "list": ["list"],
        "export": ["export", str(tmp_path), "--policy", "PPO", "--out", str(out)],
    }
    done = fieldrl_without_training(*args[command])
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    needs = cli.EXPORT_STACK if command == "export" else cli.TRAINING_STACK
    missing = [dist for module, dist in needs.items() if module in BLOCKED]
    assert missing[:4] == ["torch", "stable-baselines3", "sb3-contrib", "gymnasium"]
    assert done.stderr.splitlines() == [
        f"error: fieldrl {command} needs packages of the training stack that are not installed (torch, "
        f"stable-baselines3, sb3-contrib, gymnasium, {len(missing) - 4} more): pip install 'fieldrl[train]'"
    ]
    assert not out.exists()
