"""Imports flow one way: the layers in ``.importlinter`` hold, and the check does catch an arrow back up."""

from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / ".importlinter"


def _lint_imports(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "lint-imports"
    assert exe.exists(), f"{exe}: missing; install import-linter (it is in the test extra)"
    return subprocess.run(
        [str(exe), "--no-cache", "--no-logo", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_import_contract_is_kept() -> None:
    run = _lint_imports(str(CONTRACT))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_the_layers_check_fails_on_imports_that_go_up(tmp_path: Path) -> None:
    """The same layers upside down: every import the package makes now points up, and the check says so."""
    config = configparser.ConfigParser()
    config.read(CONTRACT)
    layers = config["importlinter:contract:layers"]
    upside_down = [line for line in layers["layers"].splitlines() if line.strip()][::-1]
    reversed_config = configparser.ConfigParser()
    reversed_config["importlinter"] = dict(config["importlinter"])
    reversed_config["importlinter:contract:layers"] = {
        "name": "upside down",
        "type": "layers",
        "containers": layers["containers"],
        "layers": "\n" + "\n".join(upside_down),
    }
    path = tmp_path / "upside-down.ini"
    with path.open("w") as fh:
        reversed_config.write(fh)
    run = _lint_imports(str(path))
    assert run.returncode != 0, run.stdout + run.stderr
    assert "upside down BROKEN" in run.stdout
    assert "fieldrl.cli -> fieldrl.api" in run.stdout  # the face imports the API: upward once reversed


def test_policies_take_a_training_spec_not_a_scenario_entry() -> None:
    """The contract above sees imports only: a function of ``fieldrl.policies`` handed the scenario's
    learned entry (``entry: Any``) and reading its attributes would depend on the scenario unseen.
    Training reads a :class:`~fieldrl.policies.spec.TrainingSpec` instead; no parameter is an entry."""
    import ast

    handed = []
    for path in sorted((ROOT / "src/fieldrl/policies").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                    if "entry" in arg.arg.lower():
                        handed.append(f"{path.relative_to(ROOT)}: {node.name}({arg.arg})")
    assert handed == []
